/* agent-fake-producer MODE: fires parcagpu probes (the library's probes.d) with hand-made data,
 * so that the agent-faithful consumer's reading can be checked against known input, PC sampling
 * included, without the library. It waits until a consumer has raised the semaphores, fires,
 * prints one FAKE_PRODUCER {json} line saying what it fired, then waits for stdin to close (so
 * that the consumer can still read its memory, cubins through /proc/PID/mem) and exits.
 *
 * Modes:
 *   sites      activity_batch fired from two places: 5 records at the first note, 7 at the last.
 *              The agent attaches the last note only; all 12 correlation IDs are announced.
 *   pc         stall_reason_map, cubin_loaded (twice for one CRC), gpu_config (twice for one
 *              device, the second with another factor), and one pc_sample_batch of 1100 records
 *              (the agent reads 1024).
 *   bad-pc     three pc_sample_batch firings the agent gives up on part-way: a NULL functionName
 *              at record 20 of 40, an unreadable stallReason at record 5 of 10, and 3 record
 *              pointers that end 8 bytes before an unreadable page (the agent reads 16 at once).
 *   bad-batch  activity_batch: one unreadable record among 10 (skipped), then 3 record pointers
 *              that end before an unreadable page (the group of 16 is given up).
 *
 * Built with -fno-toplevel-reorder: the notes then follow the order of the functions below. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "probes.h" /* generated from src/base/probes.d */

/* A kernel activity record as the agent reads it (include/parcagpu/abi.h). */
#include "parcagpu/abi.h"

static const char kKernelName[] = "_Z10fake_kernelPf";

static void *make_kernel_record(uint32_t corr) {
  uint8_t *r = calloc(1, PARCAGPU_KREC_SIZE);
  const uint32_t kind = PARCAGPU_KIND_CONCURRENT_KERNEL;
  const uint64_t start = 1000 * (uint64_t)corr, end = start + 500;
  const char *name = kKernelName;
  memcpy(r + PARCAGPU_KREC_OFF_KIND, &kind, 4);
  memcpy(r + PARCAGPU_KREC_OFF_START, &start, 8);
  memcpy(r + PARCAGPU_KREC_OFF_END, &end, 8);
  memcpy(r + PARCAGPU_KREC_OFF_CORRELATION_ID, &corr, 4);
  memcpy(r + PARCAGPU_KREC_OFF_NAME, &name, 8);
  return r;
}

/* One site per probe, as in the library, except activity_batch: two sites, in this order in the
 * notes. */
#define FAKE_PROBE_FN __attribute__((noinline, noipa))
FAKE_PROBE_FN void fire_activity_first_site(const void **recs, uint32_t n) {
  PARCAGPU_ACTIVITY_BATCH(recs, n);
}
FAKE_PROBE_FN void fire_activity_last_site(const void **recs, uint32_t n) {
  PARCAGPU_ACTIVITY_BATCH(recs, n);
}
FAKE_PROBE_FN void fire_correlation(uint32_t corr, int32_t cbid, const char *name) {
  PARCAGPU_CUDA_CORRELATION(corr, cbid, name);
}
FAKE_PROBE_FN void fire_pc_sample_batch(const void **recs, uint32_t n) {
  PARCAGPU_PC_SAMPLE_BATCH(recs, n);
}
FAKE_PROBE_FN void fire_stall_reason_map(const char *names, uint32_t n) {
  PARCAGPU_STALL_REASON_MAP(names, n);
}
FAKE_PROBE_FN void fire_cubin_loaded(uint64_t crc, const void *cubin, uint64_t size) {
  PARCAGPU_CUBIN_LOADED(crc, cubin, size);
}
FAKE_PROBE_FN void fire_gpu_config(uint32_t dev, uint32_t factor, uint32_t clock, uint32_t sms) {
  PARCAGPU_GPU_CONFIG(dev, factor, clock, sms);
}

static int semaphores_raised(void) {
  return PARCAGPU_CUDA_CORRELATION_ENABLED() && PARCAGPU_ACTIVITY_BATCH_ENABLED() &&
         PARCAGPU_PC_SAMPLE_BATCH_ENABLED() && PARCAGPU_STALL_REASON_MAP_ENABLED() &&
         PARCAGPU_CUBIN_LOADED_ENABLED() && PARCAGPU_GPU_CONFIG_ENABLED();
}

/* n pointers placed so that they end 8 bytes before a PROT_NONE page. */
static const void **pointers_before_a_hole(uint32_t n) {
  const long page = sysconf(_SC_PAGESIZE);
  uint8_t *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED || mprotect(m + page, page, PROT_NONE) != 0) abort();
  return (const void **)(m + page - 8 - 8 * n);
}

static void mode_sites(void) {
  enum { kFirst = 5, kLast = 7 };
  const void *first[kFirst], *last[kLast];
  for (uint32_t i = 0; i < kFirst; i++) {
    first[i] = make_kernel_record(1000 + i);
    fire_correlation(1000 + i, 211, kKernelName);
  }
  for (uint32_t i = 0; i < kLast; i++) {
    last[i] = make_kernel_record(2000 + i);
    fire_correlation(2000 + i, -307, kKernelName);
  }
  fire_activity_first_site(first, kFirst);
  fire_activity_last_site(last, kLast);
  printf("FAKE_PRODUCER {\"pid\":%d,\"first_site_records\":%d,\"last_site_records\":%d}\n",
         (int)getpid(), kFirst, kLast);
}

/* A PC record: CUpti_PCSamplingPCData with the CUDA 12.4+ correlationId (60 bytes). */
struct pc_record {
  uint64_t size, crc, pc_offset;
  uint32_t function_index, pad;
  const char *function_name;
  uint64_t stall_reason_count;
  const uint32_t *stall_reason; /* {index, samples} pairs */
  uint32_t correlation_id;
} __attribute__((packed));

static const char *kFunctions[] = {"_Z4gemmPfS_S_", "_Z7softmaxPf", "_Z6reducePf"};

static struct pc_record *make_pc_record(uint64_t crc, uint32_t corr, const char *fn,
                                        uint32_t nstalls) {
  struct pc_record *r = calloc(1, sizeof(*r));
  uint32_t *stalls = calloc(2 * 64, sizeof(uint32_t)); /* the agent copies 64 entries */
  for (uint32_t s = 0; s < nstalls; s++) {
    stalls[2 * s] = s + 1;  /* stall reason index */
    stalls[2 * s + 1] = 10; /* samples */
  }
  for (uint32_t s = nstalls; s < 64; s++) stalls[2 * s + 1] = 1000000; /* must not be counted */
  r->size = sizeof(*r);
  r->crc = crc;
  r->pc_offset = 0x40;
  r->function_name = fn;
  r->stall_reason_count = nstalls;
  r->stall_reason = stalls;
  r->correlation_id = corr;
  return r;
}

static void *own_executable(size_t *size) {
  FILE *f = fopen("/proc/self/exe", "rb");
  if (!f) abort();
  fseek(f, 0, SEEK_END);
  *size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  void *buf = malloc(*size);
  if (fread(buf, 1, *size, f) != *size) abort();
  fclose(f);
  return buf;
}

static void mode_pc(void) {
  enum { kRecords = 1100, kAnnounced = 50 };
  static char names[64][64];
  /* Every page of the blob written: BPF reads cannot fault pages in, so a page of .bss never
   * touched makes the agent's 4 KiB copy fail. */
  memset(names, 0, sizeof names);
  const int nnames = 10;
  for (int i = 0; i < nnames; i++)
    snprintf(names[i + 1], sizeof names[0], "stall_reason_%d", i + 1);
  fire_stall_reason_map(&names[0][0], nnames + 1);

  size_t cubin_size;
  void *cubin = own_executable(&cubin_size);
  const uint64_t crc_a = 0x1111222233334444ull, crc_b = 0x5555666677778888ull;
  fire_cubin_loaded(crc_a, cubin, cubin_size);
  fire_cubin_loaded(crc_a, cubin, cubin_size); /* a repeat: the agent keeps the first */
  fire_cubin_loaded(crc_b, cubin, 4096);       /* 4 KiB of an ELF file: not parsable */
  fire_gpu_config(0, 20, 1980000, 132);
  fire_gpu_config(0, 7, 1980000, 132); /* ignored by the agent: first per device wins */

  for (uint32_t c = 1; c <= kAnnounced; c++) fire_correlation(c, 211, kFunctions[0]);
  const void **recs = calloc(kRecords, sizeof(void *));
  for (uint32_t i = 0; i < kRecords; i++) {
    /* Correlation IDs: 1..50 announced, 0 every 10th, 9000+ never announced. */
    const uint32_t corr = i % 10 == 0 ? 0 : i % 10 == 5 ? 9000 + i : 1 + i % kAnnounced;
    recs[i] = make_pc_record(i % 4 == 0 ? crc_b : crc_a, corr, kFunctions[i % 3], 1 + i % 3);
  }
  fire_pc_sample_batch(recs, kRecords);
  printf(
      "FAKE_PRODUCER {\"pid\":%d,\"records\":%d,\"crc_a\":\"0x%016llx\",\"crc_b\":\"0x%016llx\"}\n",
      (int)getpid(), kRecords, (unsigned long long)crc_a, (unsigned long long)crc_b);
}

static void mode_bad_pc(void) {
  const void *a[40], *b[10];
  for (uint32_t i = 0; i < 40; i++) a[i] = make_pc_record(1, 0, i == 20 ? NULL : kFunctions[0], 1);
  fire_pc_sample_batch(a, 40);
  for (uint32_t i = 0; i < 10; i++) {
    struct pc_record *r = make_pc_record(1, 0, kFunctions[1], 1);
    if (i == 5) r->stall_reason = (const uint32_t *)8; /* unreadable */
    b[i] = r;
  }
  fire_pc_sample_batch(b, 10);
  const void **c = pointers_before_a_hole(3);
  for (uint32_t i = 0; i < 3; i++) c[i] = make_pc_record(1, 0, kFunctions[2], 1);
  fire_pc_sample_batch(c, 3);
  printf("FAKE_PRODUCER {\"pid\":%d}\n", (int)getpid());
}

static void mode_bad_batch(void) {
  const void *a[10];
  for (uint32_t i = 0; i < 10; i++) {
    a[i] = i == 4 ? (const void *)16 : make_kernel_record(100 + i);
    fire_correlation(100 + i, 211, kKernelName);
  }
  fire_activity_last_site(a, 10);
  const void **c = pointers_before_a_hole(3);
  for (uint32_t i = 0; i < 3; i++) {
    c[i] = make_kernel_record(200 + i);
    fire_correlation(200 + i, 211, kKernelName);
  }
  fire_activity_last_site(c, 3);
  printf("FAKE_PRODUCER {\"pid\":%d}\n", (int)getpid());
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: agent-fake-producer sites|pc|bad-pc|bad-batch\n");
    return 2;
  }
  /* The kernel raises the semaphores when the consumer attaches its uprobes. */
  for (int i = 0; !semaphores_raised(); i++) {
    if (i == 3000) {
      fprintf(stderr, "agent-fake-producer: no consumer attached within 30 s\n");
      return 1;
    }
    const struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (strcmp(argv[1], "sites") == 0)
    mode_sites();
  else if (strcmp(argv[1], "pc") == 0)
    mode_pc();
  else if (strcmp(argv[1], "bad-pc") == 0)
    mode_bad_pc();
  else if (strcmp(argv[1], "bad-batch") == 0)
    mode_bad_batch();
  else
    return 2;
  fflush(stdout);
  char buf[64];
  while (fread(buf, 1, sizeof buf, stdin) > 0) {
  }
  return 0;
}
