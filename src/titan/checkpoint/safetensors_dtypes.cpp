#include "titan/checkpoint/safetensors_dtypes.h"

#include <array>

#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"

namespace titan::checkpoint {
namespace detail {
namespace {

// Ranks follow the declaration order of the Rust enum (safetensors 0.8), checked against the
// order Python's save_file writes tensors of every dtype.
const std::array<DtypeInfo, 22> kDtypes = {{
    {"BOOL", 8, 0, at::kBool},
    {"F4", 4, 1, std::nullopt},
    {"F6_E2M3", 6, 2, std::nullopt},
    {"F6_E3M2", 6, 3, std::nullopt},
    {"U8", 8, 4, at::kByte},
    {"I8", 8, 5, at::kChar},
    {"F8_E5M2", 8, 6, at::kFloat8_e5m2},
    {"F8_E4M3", 8, 7, at::kFloat8_e4m3fn},
    {"F8_E8M0", 8, 8, at::kFloat8_e8m0fnu},
    {"F8_E4M3FNUZ", 8, 9, at::kFloat8_e4m3fnuz},
    {"F8_E5M2FNUZ", 8, 10, at::kFloat8_e5m2fnuz},
    {"I16", 16, 11, at::kShort},
    {"U16", 16, 12, at::kUInt16},
    {"F16", 16, 13, at::kHalf},
    {"BF16", 16, 14, at::kBFloat16},
    {"I32", 32, 15, at::kInt},
    {"U32", 32, 16, at::kUInt32},
    {"F32", 32, 17, at::kFloat},
    {"C64", 64, 18, at::kComplexFloat},
    {"F64", 64, 19, at::kDouble},
    {"I64", 64, 20, at::kLong},
    {"U64", 64, 21, at::kUInt64},
}};

}  // namespace

const DtypeInfo* find_dtype(std::string_view name) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

const DtypeInfo* find_dtype(at::ScalarType type) {
  for (const DtypeInfo& info : kDtypes) {
    if (info.torch_type == type) return &info;
  }
  return nullptr;
}

}  // namespace detail

std::string safetensors_dtype_name(at::ScalarType type) {
  const detail::DtypeInfo* info = detail::find_dtype(type);
  if (info == nullptr)
    fail("torch dtype ", c10::toString(type), " cannot be stored in safetensors");
  return std::string(info->name);
}

at::ScalarType scalar_type_from_safetensors(const std::string& dtype) {
  const detail::DtypeInfo* info = detail::find_dtype(dtype);
  if (info == nullptr) fail("unknown safetensors dtype '", dtype, "'");
  if (!info->torch_type) fail("safetensors dtype ", dtype, " has no torch equivalent here");
  return *info->torch_type;
}

}  // namespace titan::checkpoint
