/* Introspection of the mock CUPTI (build/mock/libcupti.so.13), for parcagpu-mockapp and tests.
 *
 * The mock libcupti records what its subscriber (the library under test) asked for, so tests can
 * compare it with include/parcagpu/cbid_table.h. The application does not link libcupti (the
 * library loads it at run time, or fails to); parcagpu-mockapp reaches these functions with
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

/* The mock CUPTI's counters, each named once here: a field of MockCuptiStats, a per-thread counter
 * of the mock (cupti_mock_internal.h), a key of the MOCK_CUPTI_EXIT report's "stats" and of the
 * mock app's summary. */
#define MOCK_CUPTI_STATS(X)                                                              \
  X(records_written)        /* kernel records written into activity buffers */           \
  X(records_dropped)        /* no buffer callbacks, NULL or too small buffer */          \
  X(records_not_collected)  /* kernels run while kernel activity was not enabled */      \
  X(buffers_requested)      /* bufferRequested calls that returned a usable buffer */    \
  X(buffers_refused)        /* bufferRequested calls that returned NULL / too small */   \
  X(buffers_completed)      /* bufferCompleted calls (worker thread and flushes) */      \
  X(callbacks_dispatched)   /* callbacks delivered to the subscriber */                  \
  X(launch_callbacks_dispatched) /* ... of them, of launch cbids (the library's table) */ \
  X(callbacks_suppressed)   /* not delivered: pair not enabled or no subscriber */       \
  X(subscribe_calls)        /* successful cuptiSubscribe */                              \
  X(unsubscribe_calls)      /* successful cuptiUnsubscribe */                            \
  X(activity_enable_calls)  /* successful cuptiActivityEnable / EnableContext */         \
  X(activity_disable_calls) /* successful cuptiActivityDisable / DisableContext */       \
  X(whole_domain_enables)   /* see mock_cupti_whole_domain_enables */                    \
  X(flush_all_calls)        /* cuptiActivityFlushAll calls */                            \
  X(finalize_calls)         /* cuptiFinalize calls */                                    \
  X(injected_failures)      /* entry point calls failed on purpose by MOCK_CUPTI_FAIL */ \
  X(refused_enables)        /* enables made no-ops by MOCK_CUPTI_REFUSE */                \
  X(records_spoiled)        /* kernel records given impossible times (BAD_TIMESTAMPS) */ \
  X(graph_records_written)  /* of records_written, of graph launches (graphId != 0) */ \
  X(graph_ends_stretched)   /* graph kernels that finished while kernel activity was off: */ \
                            /* their end is the next enable (as real CUPTI writes it)   */ \
  X(starts_unknown)         /* kernels running when activity was switched on: start now */

typedef struct MockCuptiStats {
#define MOCK_CUPTI_STAT_FIELD(name) uint64_t name;
  MOCK_CUPTI_STATS(MOCK_CUPTI_STAT_FIELD)
#undef MOCK_CUPTI_STAT_FIELD
} MockCuptiStats;

void mock_cupti_get_stats(MockCuptiStats *out);

/* The MOCK_CUPTI_EXIT report as it would be printed now: one JSON object, NUL-terminated,
 * truncated to `capacity`; returns its full length. */
size_t mock_cupti_report_json(char *out, size_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* PARCAGPU_MOCK_CUPTI_CONTROL_H */
