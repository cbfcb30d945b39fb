// What one CUPTI_CB_DOMAIN_NVTX callback says: an event (push, pop, start, end, mark) with its
// color, payload, range ID and message, or a name given to a thread, device or stream. CUPTI hands
// the NVTX call's parameters (CUpti_NvtxData: functionName, functionParams, functionReturnValue)
// as its nvtx*_params structs (generated_nvtx_meta.h); the call is kNvtxCallbacks' entry for the
// cbid (include/parcagpu/cbid_table.h). Pure: reads what CUPTI passed, keeps nothing.
#pragma once

#include <cstdint>

#include "nvtx/nvtx_batch.h"

namespace parcagpu {

// nvtxEventAttributes_v2 (nvtx3/nvToolsExt.h), as the library reads it: NVTX's header defines its
// functions inline, so the library keeps its own view (tests/unit/lib/nvtx_decoder_test.cc holds
// it to the toolkit's struct).
struct NvtxEventAttributes {
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t color_type;  // 1: NVTX_COLOR_ARGB
  uint32_t color;
  int32_t payload_type;  // NVTX_PAYLOAD_TYPE_*: 4, 5, 6 are 32 bits wide
  int32_t reserved0;
  uint64_t payload;      // the union's bits
  int32_t message_type;  // 1 ASCII, 2 UNICODE (wchar_t), 3 REGISTERED (a string handle)
  const void *message;
};

struct NvtxDecoded {
  enum class What : uint8_t { kNothing, kEvent, kName };
  What what = What::kNothing;
  uint16_t kind = 0;  // PARCAGPU_NVTX_KIND_* (kEvent)
  uint32_t color = 0;
  uint64_t payload = 0;
  uint64_t range_id = 0;
  uint32_t resource_kind = 0;  // PARCAGPU_NVTX_RESOURCE_* (kName)
  uint64_t resource_id = 0;
  NvtxText text;  // the event's message or the resource's name
};

// CUpti_NvtxData (cupti_callbacks.h, a typedef of an unnamed struct, which cannot be declared
// ahead): nvtx_decoder.cc static_asserts the layout.
struct NvtxCallbackData {
  const char *function_name;
  const void *function_params;
  const void *function_return_value;
};

class NvtxDecoder {
 public:
  // The callback `cbid` with CUPTI's data; kNothing for a cbid the library does not take or data
  // without parameters.
  static NvtxDecoded decode(uint32_t cbid, const NvtxCallbackData &data);

 private:
  static void decode_attributes(const void *attributes, NvtxDecoded *out);
};

}  // namespace parcagpu
