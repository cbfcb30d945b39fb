#include "nvtx/nvtx_decoder.h"

#include <cupti.h>

#include <cstddef>

#include "parcagpu/cbid_table.h"

namespace parcagpu {

// The table's cbids are CUPTI's (cupti_nvtx_cbid.h).
static_assert(static_cast<uint32_t>(CbDomain::Nvtx) == CUPTI_CB_DOMAIN_NVTX);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxMarkA)].call == NvtxCall::MarkA);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxMarkW)].call == NvtxCall::MarkW);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxMarkEx)].call == NvtxCall::MarkEx);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxRangeStartA)].call ==
              NvtxCall::RangeStartA);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxRangeStartW)].call ==
              NvtxCall::RangeStartW);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxRangeStartEx)].call ==
              NvtxCall::RangeStartEx);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxRangeEnd)].call == NvtxCall::RangeEnd);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxRangePushA)].call ==
              NvtxCall::RangePushA);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxRangePushW)].call ==
              NvtxCall::RangePushW);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxRangePushEx)].call ==
              NvtxCall::RangePushEx);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxRangePop)].call == NvtxCall::RangePop);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxNameOsThreadA)].call ==
              NvtxCall::NameOsThread);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxNameCuDeviceA)].call ==
              NvtxCall::NameDevice);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxNameCuStreamA)].call ==
              NvtxCall::NameStream);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxNameCudaDeviceA)].call ==
              NvtxCall::NameDevice);
static_assert(kNvtxCallbacks[nvtx_index(CUPTI_CBID_NVTX_nvtxNameCudaStreamA)].call ==
              NvtxCall::NameStream);
static_assert(offsetof(CUpti_NvtxData, functionName) == offsetof(NvtxCallbackData, function_name));
static_assert(offsetof(CUpti_NvtxData, functionParams) ==
              offsetof(NvtxCallbackData, function_params));
static_assert(offsetof(CUpti_NvtxData, functionReturnValue) ==
              offsetof(NvtxCallbackData, function_return_value));

namespace {

constexpr int32_t kColorArgb = 1;
constexpr int32_t kMessageAscii = 1;
constexpr int32_t kMessageUnicode = 2;
constexpr int32_t kPayloadUint32 = 4, kPayloadFloat = 6;  // 4..6: 32-bit payloads

// The first parameter of every call but the naming ones: a message, the attributes, a range ID.
template <typename T>
T first_param(const void *params) {
  return *static_cast<const T *>(params);
}

// The naming calls' parameters: the resource (an int, a uint32_t or a handle), then its name.
struct NameParams {
  uint64_t resource;  // the low 4 bytes for an int or uint32_t (x86-64: little-endian)
  const char *name;
};

uint16_t event_kind(NvtxCall c) {
  switch (c) {
    case NvtxCall::MarkA:
    case NvtxCall::MarkW:
    case NvtxCall::MarkEx:
      return PARCAGPU_NVTX_KIND_MARK;
    case NvtxCall::RangeStartA:
    case NvtxCall::RangeStartW:
    case NvtxCall::RangeStartEx:
      return PARCAGPU_NVTX_KIND_RANGE_START;
    case NvtxCall::RangeEnd:
      return PARCAGPU_NVTX_KIND_RANGE_END;
    case NvtxCall::RangePushA:
    case NvtxCall::RangePushW:
    case NvtxCall::RangePushEx:
      return PARCAGPU_NVTX_KIND_RANGE_PUSH;
    case NvtxCall::RangePop:
      return PARCAGPU_NVTX_KIND_RANGE_POP;
    default:
      return 0;
  }
}

bool is_ex(NvtxCall c) {
  return c == NvtxCall::MarkEx || c == NvtxCall::RangeStartEx || c == NvtxCall::RangePushEx;
}
bool is_wide(NvtxCall c) {
  return c == NvtxCall::MarkW || c == NvtxCall::RangeStartW || c == NvtxCall::RangePushW;
}

void decode_name(NvtxCall call, const void *params, NvtxDecoded *out) {
  const auto *p = static_cast<const NameParams *>(params);
  out->what = NvtxDecoded::What::kName;
  out->text.ascii = p->name;
  switch (call) {
    case NvtxCall::NameOsThread:
      out->resource_kind = PARCAGPU_NVTX_RESOURCE_OS_THREAD;
      out->resource_id = static_cast<uint32_t>(p->resource);
      break;
    case NvtxCall::NameDevice:
      out->resource_kind = PARCAGPU_NVTX_RESOURCE_CUDA_DEVICE;
      out->resource_id = static_cast<uint32_t>(p->resource);
      break;
    default:
      out->resource_kind = PARCAGPU_NVTX_RESOURCE_CUDA_STREAM;
      out->resource_id = p->resource;
      break;
  }
}

}  // namespace

void NvtxDecoder::decode_attributes(const void *attributes, NvtxDecoded *out) {
  const auto *a = static_cast<const NvtxEventAttributes *>(attributes);
  // An older or foreign struct shorter than ours: nothing beyond its size is read.
  if (!a || a->size < sizeof(NvtxEventAttributes)) {
    out->text.unreadable = a != nullptr;
    return;
  }
  if (a->color_type == kColorArgb) out->color = a->color;
  out->payload = a->payload;
  if (a->payload_type >= kPayloadUint32 && a->payload_type <= kPayloadFloat)
    out->payload &= 0xffffffffu;
  if (a->message_type == kMessageAscii)
    out->text.ascii = static_cast<const char *>(a->message);
  else if (a->message_type == kMessageUnicode)
    out->text.wide = static_cast<const wchar_t *>(a->message);
  else if (a->message_type != 0)  // 0: no message given
    out->text.unreadable = true;
}

NvtxDecoded NvtxDecoder::decode(uint32_t cbid, const NvtxCallbackData &data) {
  NvtxDecoded out;
  const size_t i = nvtx_index(cbid);
  if (i == kNumNvtxCallbacks) return out;
  const NvtxCall call = kNvtxCallbacks[i].call;
  const void *params = data.function_params;
  if (!params && call != NvtxCall::RangePop) return out;
  if (call == NvtxCall::NameOsThread || call == NvtxCall::NameDevice ||
      call == NvtxCall::NameStream) {
    decode_name(call, params, &out);
    return out;
  }
  out.what = NvtxDecoded::What::kEvent;
  out.kind = event_kind(call);
  if (call == NvtxCall::RangeEnd) {
    out.range_id = first_param<uint64_t>(params);
  } else if (is_ex(call)) {
    decode_attributes(first_param<const void *>(params), &out);
  } else if (is_wide(call)) {
    out.text.wide = first_param<const wchar_t *>(params);
  } else if (call != NvtxCall::RangePop) {
    out.text.ascii = first_param<const char *>(params);
  }
  // A start returns its range's ID (nvtxRangeId_t, 64 bits), which its end passes back.
  if (out.kind == PARCAGPU_NVTX_KIND_RANGE_START && data.function_return_value)
    out.range_id = *static_cast<const uint64_t *>(data.function_return_value);
  return out;
}

}  // namespace parcagpu
