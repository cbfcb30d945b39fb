// NvtxDecoder on CUPTI's own parameter structs (generated_nvtx_meta.h) and NVTX's attributes
// (nvtx3/nvToolsExt.h), built as CUPTI hands them to a CUPTI_CB_DOMAIN_NVTX callback.
#include "nvtx/nvtx_decoder.h"

#include <cupti.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h>
#include <nvtx3/nvToolsExtCudaRt.h>
#include <nvtx3/nvToolsExtSync.h>
// After NVTX's types.
#include <generated_nvtx_meta.h>

#include <cstddef>

#include "parcagpu/cbid_table.h"

namespace parcagpu {
namespace {

// The library's view of nvtxEventAttributes_v2 is the toolkit's struct.
static_assert(sizeof(NvtxEventAttributes) == sizeof(nvtxEventAttributes_t));
static_assert(offsetof(NvtxEventAttributes, size) == offsetof(nvtxEventAttributes_t, size));
static_assert(offsetof(NvtxEventAttributes, color_type) ==
              offsetof(nvtxEventAttributes_t, colorType));
static_assert(offsetof(NvtxEventAttributes, color) == offsetof(nvtxEventAttributes_t, color));
static_assert(offsetof(NvtxEventAttributes, payload_type) ==
              offsetof(nvtxEventAttributes_t, payloadType));
static_assert(offsetof(NvtxEventAttributes, payload) == offsetof(nvtxEventAttributes_t, payload));
static_assert(offsetof(NvtxEventAttributes, message_type) ==
              offsetof(nvtxEventAttributes_t, messageType));
static_assert(offsetof(NvtxEventAttributes, message) == offsetof(nvtxEventAttributes_t, message));

template <typename P>
NvtxDecoded decode(uint32_t cbid, const P &params, const void *ret = nullptr) {
  const CUpti_NvtxData d{"nvtxSomething", &params, ret};
  return NvtxDecoder::decode(cbid, *reinterpret_cast<const NvtxCallbackData *>(&d));
}

nvtxEventAttributes_t attributes(const char *message) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xff123456u;
  a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  a.payload.ullValue = 0x1122334455667788ull;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  return a;
}

TEST(NvtxDecoder, PushPopAndMarkA) {
  const nvtxRangePushA_params push{"forward"};
  NvtxDecoded d = decode(CUPTI_CBID_NVTX_nvtxRangePushA, push);
  EXPECT_EQ(d.what, NvtxDecoded::What::kEvent);
  EXPECT_EQ(d.kind, PARCAGPU_NVTX_KIND_RANGE_PUSH);
  EXPECT_STREQ(d.text.ascii, "forward");
  EXPECT_EQ(d.color, 0u);
  const nvtxRangePop_params pop{};
  d = decode(CUPTI_CBID_NVTX_nvtxRangePop, pop);
  EXPECT_EQ(d.kind, PARCAGPU_NVTX_KIND_RANGE_POP);
  EXPECT_EQ(d.text.ascii, nullptr);
  const nvtxMarkA_params mark{"update"};
  d = decode(CUPTI_CBID_NVTX_nvtxMarkA, mark);
  EXPECT_EQ(d.kind, PARCAGPU_NVTX_KIND_MARK);
  EXPECT_STREQ(d.text.ascii, "update");
}

TEST(NvtxDecoder, StartTakesItsIdFromTheReturnValueAndEndFromItsParameter) {
  const nvtxRangeStartA_params start{"optimizer"};
  const nvtxRangeId_t id = 0xabcdef0123ull;
  NvtxDecoded d = decode(CUPTI_CBID_NVTX_nvtxRangeStartA, start, &id);
  EXPECT_EQ(d.kind, PARCAGPU_NVTX_KIND_RANGE_START);
  EXPECT_EQ(d.range_id, id);
  EXPECT_STREQ(d.text.ascii, "optimizer");
  const nvtxRangeEnd_params end{id};
  d = decode(CUPTI_CBID_NVTX_nvtxRangeEnd, end);
  EXPECT_EQ(d.kind, PARCAGPU_NVTX_KIND_RANGE_END);
  EXPECT_EQ(d.range_id, id);
}

TEST(NvtxDecoder, ExAttributesGiveColorPayloadAndMessage) {
  const nvtxEventAttributes_t a = attributes("backward");
  const nvtxRangePushEx_params push{&a};
  NvtxDecoded d = decode(CUPTI_CBID_NVTX_nvtxRangePushEx, push);
  EXPECT_EQ(d.kind, PARCAGPU_NVTX_KIND_RANGE_PUSH);
  EXPECT_EQ(d.color, 0xff123456u);
  EXPECT_EQ(d.payload, 0x1122334455667788ull);
  EXPECT_STREQ(d.text.ascii, "backward");
  const nvtxRangeStartEx_params start{&a};
  const nvtxRangeId_t id = 9;
  d = decode(CUPTI_CBID_NVTX_nvtxRangeStartEx, start, &id);
  EXPECT_EQ(d.kind, PARCAGPU_NVTX_KIND_RANGE_START);
  EXPECT_EQ(d.range_id, 9u);
  const nvtxMarkEx_params mark{&a};
  EXPECT_EQ(decode(CUPTI_CBID_NVTX_nvtxMarkEx, mark).kind, PARCAGPU_NVTX_KIND_MARK);
}

TEST(NvtxDecoder, A32BitPayloadKeepsOnlyItsBitsAndNoColorTypeNoColor) {
  nvtxEventAttributes_t a = attributes("x");
  a.payload.ullValue = 0xdeadbeef00000000ull;  // what the union held before
  a.payloadType = NVTX_PAYLOAD_TYPE_INT32;
  a.payload.iValue = -2;
  a.colorType = NVTX_COLOR_UNKNOWN;
  const nvtxMarkEx_params mark{&a};
  const NvtxDecoded d = decode(CUPTI_CBID_NVTX_nvtxMarkEx, mark);
  EXPECT_EQ(d.payload, 0xfffffffeull);
  EXPECT_EQ(d.color, 0u);
}

TEST(NvtxDecoder, WideRegisteredAndShortAttributes) {
  nvtxEventAttributes_t a = attributes(nullptr);
  a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  a.message.unicode = L"wide";
  const nvtxRangePushEx_params push{&a};
  NvtxDecoded d = decode(CUPTI_CBID_NVTX_nvtxRangePushEx, push);
  EXPECT_EQ(d.text.ascii, nullptr);
  EXPECT_STREQ(d.text.wide, L"wide");
  EXPECT_FALSE(d.text.unreadable);
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = reinterpret_cast<nvtxStringHandle_t>(0x1234);
  d = decode(CUPTI_CBID_NVTX_nvtxRangePushEx, push);
  EXPECT_TRUE(d.text.unreadable);
  EXPECT_EQ(d.text.ascii, nullptr);
  EXPECT_EQ(d.kind, PARCAGPU_NVTX_KIND_RANGE_PUSH);  // the event stays, without its message
  a = attributes("old");
  a.size = 16;  // a struct older than ours: nothing past its size is read
  d = decode(CUPTI_CBID_NVTX_nvtxRangePushEx, push);
  EXPECT_TRUE(d.text.unreadable);
  EXPECT_EQ(d.color, 0u);
  const nvtxRangePushW_params pushw{L"w"};
  d = decode(CUPTI_CBID_NVTX_nvtxRangePushW, pushw);
  EXPECT_STREQ(d.text.wide, L"w");
}

TEST(NvtxDecoder, NamesOfThreadsDevicesAndStreams) {
  const nvtxNameOsThreadA_params thread{4242, "loader"};
  NvtxDecoded d = decode(CUPTI_CBID_NVTX_nvtxNameOsThreadA, thread);
  EXPECT_EQ(d.what, NvtxDecoded::What::kName);
  EXPECT_EQ(d.resource_kind, uint32_t{PARCAGPU_NVTX_RESOURCE_OS_THREAD});
  EXPECT_EQ(d.resource_id, 4242u);
  EXPECT_STREQ(d.text.ascii, "loader");
  const nvtxNameCudaDeviceA_params dev{3, "gpu3"};
  d = decode(CUPTI_CBID_NVTX_nvtxNameCudaDeviceA, dev);
  EXPECT_EQ(d.resource_kind, uint32_t{PARCAGPU_NVTX_RESOURCE_CUDA_DEVICE});
  EXPECT_EQ(d.resource_id, 3u);
  const nvtxNameCuDeviceA_params cudev{1, "gpu1"};
  EXPECT_EQ(decode(CUPTI_CBID_NVTX_nvtxNameCuDeviceA, cudev).resource_id, 1u);
  const nvtxNameCudaStreamA_params stream{reinterpret_cast<cudaStream_t>(0x7f00aa00bb00ull), "s"};
  d = decode(CUPTI_CBID_NVTX_nvtxNameCudaStreamA, stream);
  EXPECT_EQ(d.resource_kind, uint32_t{PARCAGPU_NVTX_RESOURCE_CUDA_STREAM});
  EXPECT_EQ(d.resource_id, 0x7f00aa00bb00ull);
  const nvtxNameCuStreamA_params custream{reinterpret_cast<CUstream>(0x10), "t"};
  EXPECT_EQ(decode(CUPTI_CBID_NVTX_nvtxNameCuStreamA, custream).resource_id, 0x10u);
}

TEST(NvtxDecoder, CallsNotTakenAndMissingParametersAreNothing) {
  const nvtxNameCategoryA_params cat{1, "c"};
  EXPECT_EQ(decode(CUPTI_CBID_NVTX_nvtxNameCategoryA, cat).what, NvtxDecoded::What::kNothing);
  const CUpti_NvtxData d{"nvtxRangePushA", nullptr, nullptr};
  EXPECT_EQ(NvtxDecoder::decode(CUPTI_CBID_NVTX_nvtxRangePushA,
                                *reinterpret_cast<const NvtxCallbackData *>(&d))
                .what,
            NvtxDecoded::What::kNothing);
}

TEST(NvtxDecoder, TheTableHoldsEveryCallOnce) {
  for (size_t i = 0; i < kNumNvtxCallbacks; ++i) {
    EXPECT_LT(kNvtxCallbacks[i].cbid, uint32_t{CUPTI_CBID_NVTX_SIZE});
    EXPECT_EQ(nvtx_index(kNvtxCallbacks[i].cbid), i) << kNvtxCallbacks[i].name;
  }
}

}  // namespace
}  // namespace parcagpu
