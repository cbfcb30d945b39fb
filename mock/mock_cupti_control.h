/* Introspection of the mock CUPTI (build/mock/libcupti.so.13), for parcagpu-mockapp and tests.
 *
 * The mock libcupti records what its subscriber (the library under test) asked for, so tests can
 * compare it with include/parcagpu/cbid_table.h. The application does not link libcupti (the library loads it
 * at run time, or fails to); parcagpu-mockapp reaches these functions with
 * dlopen("libcupti.so.13", RTLD_NOLOAD) + dlsym. All functions are thread-safe.
 */
#ifndef PARCAGPU_MOCK_CUPTI_CONTROL_H
#define PARCAGPU_MOCK_CUPTI_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A callback: domain is CUpti_CallbackDomain (1 DRIVER, 2 RUNTIME, 3 RESOURCE, 4 SYNCHRONIZE,
 * 5 NVTX, 6 STATE), cbid the id within it. */
typedef struct MockCuptiPair {
  uint32_t domain;
  uint32_t cbid;
} MockCuptiPair;

/* "DRIVER", "RUNTIME", "RESOURCE", "SYNCHRONIZE", "NVTX", "STATE", or "INVALID". */
const char *mock_cupti_domain_name(uint32_t domain);

/* Pairs the current (or, after cuptiUnsubscribe, the last) subscriber has enabled and not
 * disabled, ordered by (domain, cbid): up to `capacity` are written, the total is returned.
 * A new cuptiSubscribe starts from an empty set, as in real CUPTI. */
size_t mock_cupti_enabled_callbacks(MockCuptiPair *out, size_t capacity);
/* Every pair ever enabled in this process, by any subscriber. */
size_t mock_cupti_ever_enabled_callbacks(MockCuptiPair *out, size_t capacity);
int mock_cupti_callback_enabled(uint32_t domain, uint32_t cbid);
/* Calls of cuptiEnableDomain / cuptiEnableAllDomains with enable != 0 that succeeded. */
uint64_t mock_cupti_whole_domain_enables(void);
/* Whether a subscriber is subscribed now. */
int mock_cupti_subscribed(void);

/* Activity kinds (CUpti_ActivityKind): enabled now (globally or for some context) / ever. */
int mock_cupti_activity_kind_enabled(uint32_t kind);
int mock_cupti_activity_kind_ever_enabled(uint32_t kind);
/* Kernel activity (CONCURRENT_KERNEL or KERNEL) enabled now / ever. */
int mock_cupti_kernel_activity_enabled(void);
int mock_cupti_kernel_activity_ever_enabled(void);
/* "CONCURRENT_KERNEL", "KERNEL", ... ; "UNKNOWN" past the header's list. */
const char *mock_cupti_activity_kind_name(uint32_t kind);

typedef struct MockCuptiStats {
  uint64_t records_written;        /* kernel records written into activity buffers */
  uint64_t records_dropped;        /* no buffer callbacks, NULL or too small buffer */
  uint64_t records_not_collected;  /* kernels run while kernel activity was not enabled */
  uint64_t buffers_requested;      /* bufferRequested calls that returned a usable buffer */
  uint64_t buffers_refused;        /* bufferRequested calls that returned NULL / too small */
  uint64_t buffers_completed;      /* bufferCompleted calls (worker thread and flushes) */
  uint64_t callbacks_dispatched;   /* callbacks delivered to the subscriber */
  uint64_t callbacks_suppressed;   /* not delivered: pair not enabled or no subscriber */
  uint64_t subscribe_calls;        /* successful cuptiSubscribe */
  uint64_t unsubscribe_calls;      /* successful cuptiUnsubscribe */
  uint64_t activity_enable_calls;  /* successful cuptiActivityEnable / EnableContext */
  uint64_t activity_disable_calls; /* successful cuptiActivityDisable / DisableContext */
  uint64_t whole_domain_enables;   /* see mock_cupti_whole_domain_enables */
  uint64_t flush_all_calls;        /* cuptiActivityFlushAll calls */
  uint64_t finalize_calls;         /* cuptiFinalize calls */
  uint64_t injected_failures;      /* entry point calls failed on purpose by MOCK_CUPTI_FAIL */
  uint64_t refused_enables;        /* enables made no-ops by MOCK_CUPTI_REFUSE */
} MockCuptiStats;

void mock_cupti_get_stats(MockCuptiStats *out);

/* The MOCK_CUPTI_EXIT report as it would be printed now: one JSON object, NUL-terminated,
 * truncated to `capacity`; returns its full length. */
size_t mock_cupti_report_json(char *out, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* PARCAGPU_MOCK_CUPTI_CONTROL_H */
