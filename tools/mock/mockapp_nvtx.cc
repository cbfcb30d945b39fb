// --nvtx and --scenario=nvtx: the application's NVTX ranges, through NVTX v3's own loader (the
// toolkit's header-only nvtx3, as PyTorch and every NVTX user compile it in). The first NVTX call
// reads NVTX_INJECTION64_PATH, dlopens it and calls its InitializeInjectionNvtx2, which (in
// libparcagpu, forwarding to the mock libcupti, or in the mock libcupti itself) takes NVTX's
// function slots; an unusable injection leaves every call a no-op. --nvtx names the library under
// test there (unless NVTX_INJECTION64_PATH is set) and makes one NVTX call before cuInit, as a
// program that marks its start before touching the GPU does.
//
// The scenario, on each thread that runs it: the thread named (nvtxNameOsThreadA), then kSteps
// steps of nested ranges around kernel launches, each message from a buffer overwritten right
// after the call (a library that keeps the application's pointer reads the overwritten text):
//   push "step N" > { push "forward" > launch; pop; pushEx "backward" (color, payload) > launch;
//   pop; start "optimizer" > { mark "update"; launch } end } pop
// It prints what it did as MOCKAPP_NVTX (tid, events by kind, messages in order) for
// tests/integration/test_nvtx.py to compare with what a consumer read.
#include <cupti.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "mock_cuda.h"
#include "mockapp.h"

namespace mockapp {
namespace {

constexpr int kSteps = 3;
constexpr uint32_t kBackwardColor = 0xff00c0ffu;
constexpr uint64_t kBackwardPayload = 4242;
std::mutex g_print_mutex;

struct Made {
  int push = 0, pop = 0, start = 0, end = 0, mark = 0, launches = 0;
  std::vector<std::string> messages;  // in order, "" for pop and end
};

// The message handed to NVTX, from a buffer overwritten as soon as the call returns.
template <typename F>
auto with_message(const std::string &text, Made &m, F call) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s", text.c_str());
  auto r = call(buf);
  std::memset(buf, 'X', sizeof buf - 1);
  buf[sizeof buf - 1] = 0;
  m.messages.push_back(text);
  return r;
}

void launch(Kernels &k, const char *name, Made &m) {
  check(mock_cuda_launch(CUPTI_CB_DOMAIN_RUNTIME_API,
                         CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, k.next(name), nullptr),
        "cudaLaunchKernel");
  ++m.launches;
}

void pop(Made &m) {
  nvtxRangePop();
  ++m.pop;
  m.messages.push_back("");
}

void backward(Kernels &k, Made &m) {
  with_message("backward", m, [](const char *msg) {
    nvtxEventAttributes_t a{};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = kBackwardColor;
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = kBackwardPayload;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    return nvtxRangePushEx(&a);
  });
  ++m.push;
  launch(k, "_Z5k_mulPfi", m);
  pop(m);
}

void step(Kernels &k, int n, Made &m) {
  with_message("step " + std::to_string(n), m, [](const char *msg) { return nvtxRangePushA(msg); });
  ++m.push;
  with_message("forward", m, [](const char *msg) { return nvtxRangePushA(msg); });
  ++m.push;
  launch(k, "_Z5k_addPfi", m);
  pop(m);
  backward(k, m);
  const nvtxRangeId_t id =
      with_message("optimizer", m, [](const char *msg) { return nvtxRangeStartA(msg); });
  ++m.start;
  with_message("update", m, [](const char *msg) {
    nvtxMarkA(msg);
    return 0;
  });
  ++m.mark;
  launch(k, "_Z5k_addPfi", m);
  nvtxRangeEnd(id);
  ++m.end;
  m.messages.push_back("");
  pop(m);
}

std::string json_string(const std::string &s) {
  std::string out = "\"";
  for (char c : s) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

void print_made(uint32_t tid, const std::string &name, const Made &m) {
  std::string msgs;
  for (const std::string &s : m.messages) msgs += (msgs.empty() ? "" : ", ") + json_string(s);
  std::lock_guard<std::mutex> lock(g_print_mutex);
  std::printf(
      "MOCKAPP_NVTX {\"tid\": %u, \"name\": %s, \"push\": %d, \"pop\": %d, \"start\": %d, "
      "\"end\": %d, \"mark\": %d, \"launches\": %d, \"color\": %u, \"payload\": %llu, "
      "\"messages\": [%s]}\n",
      tid, json_string(name).c_str(), m.push, m.pop, m.start, m.end, m.mark, m.launches,
      kBackwardColor, static_cast<unsigned long long>(kBackwardPayload), msgs.c_str());
  std::fflush(stdout);
}

}  // namespace

void nvtx_before_cuinit(const std::string &library) {
  if (library != "none") setenv("NVTX_INJECTION64_PATH", library.c_str(), 0);
  nvtxMarkA("before cuInit");  // NVTX loads its injection here, before the driver does
}

void scenario_nvtx(Kernels &k) {
  const auto tid = static_cast<uint32_t>(syscall(SYS_gettid));
  const std::string name = "mockapp worker " + std::to_string(tid);
  Made m;
  with_message(name, m, [tid](const char *msg) {
    nvtxNameOsThreadA(tid, msg);
    return 0;
  });
  m.messages.pop_back();  // a name, not an event
  for (int n = 0; n < kSteps; ++n) step(k, n, m);
  print_made(tid, name, m);
}

}  // namespace mockapp
