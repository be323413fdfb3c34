#include "titan/kernels/nf4.h"

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "titan/kernels/cpu/nf4_avx512.h"

#include "titan/common/error.h"

namespace titan::kernels {
namespace {

// Midpoints between neighbouring code values, computed in float32 as bitsandbytes does.
const std::array<float, 15>& nf4_bounds() {
  static const std::array<float, 15> bounds = [] {
    std::array<float, 15> b{};
    const auto& code = nf4_code();
    for (size_t i = 0; i < b.size(); ++i) b[i] = (code[i] + code[i + 1]) / 2.0f;
    return b;
  }();
  return bounds;
}

// The index of the bucket of `v`: how many midpoints lie strictly below it (torch.bucketize
// with right=False, so a value on a midpoint takes the lower code).
uint8_t nf4_index(float v) {
  const auto& b = nf4_bounds();
  return static_cast<uint8_t>(std::lower_bound(b.begin(), b.end(), v) - b.begin());
}

template <class T>
T from_float(float v) {
  return static_cast<T>(v);
}

// Elements [first, first + count) of the weight: block by block, each block's 16 values
// (code * absmax, the same float32 products as element by element) looked up by nibble, two
// elements a byte.
template <class T>
void dequantize_range(const Nf4Weight& w, int64_t first, int64_t count, T* out) {
  const uint8_t* packed = w.packed.const_data_ptr<uint8_t>();
  const float* absmax = w.absmax.const_data_ptr<float>();
  const auto& code = nf4_code();
  const int64_t bs = w.blocksize;
  const int64_t end = first + count;
  int64_t e = first;
  while (e < end) {
    const int64_t block = e / bs;
    const int64_t run_end = std::min(end, (block + 1) * bs);
    const float scale = absmax[block];
    float values[16];
    for (int k = 0; k < 16; ++k) values[k] = code[k] * scale;
    if (e & 1) *out++ = from_float<T>(values[packed[e++ >> 1] & 0x0F]);  // a low nibble first
    for (; e + 1 < run_end; e += 2) {
      const uint8_t byte = packed[e >> 1];
      out[0] = from_float<T>(values[byte >> 4]);
      out[1] = from_float<T>(values[byte & 0x0F]);
      out += 2;
    }
    if (e < run_end) *out++ = from_float<T>(values[packed[e++ >> 1] >> 4]);
  }
}

// dequantize_range, whole blocks of 64 on AVX-512 where the CPU has it (bit for bit the same
// values), the rest by the portable loop.
template <class T>
void dequantize_range_fast(const Nf4Weight& w, int64_t first, int64_t count, T* out) {
#ifdef TITAN_NF4_AVX512
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, c10::BFloat16>) {
    const int64_t bs = w.blocksize;
    if (bs == 64 && cpu::nf4_avx512::cpu_has_avx512()) {
      const int64_t head = std::min(count, (bs - first % bs) % bs);
      if (head > 0) dequantize_range(w, first, head, out);
      const int64_t blocks = (count - head) / bs;
      const int64_t start = first + head;  // a block's first element: even, so a whole byte
      using Out = std::conditional_t<std::is_same_v<T, float>, float, uint16_t>;
      cpu::nf4_avx512::dequantize_blocks(w.packed.const_data_ptr<uint8_t>() + start / 2,
                                         w.absmax.const_data_ptr<float>() + start / bs, blocks,
                                         reinterpret_cast<Out*>(out + head));
      const int64_t done = head + blocks * bs;
      if (done < count) dequantize_range(w, first + done, count - done, out + done);
      return;
    }
  }
#endif
  dequantize_range(w, first, count, out);
}

void check_weight(const Nf4Weight& w) {
  TITAN_CHECK(w.packed.defined() && w.packed.scalar_type() == at::kByte,
              "NF4 weight: packed codes must be uint8");
  TITAN_CHECK(w.absmax.defined() && w.absmax.scalar_type() == at::kFloat,
              "NF4 weight: absmax must be float32");
  TITAN_CHECK(w.blocksize > 0, "NF4 weight: blocksize must be positive");
  const int64_t n = w.rows * w.cols;
  TITAN_CHECK(
      w.packed.numel() == (n + 1) / 2 && w.absmax.numel() == (n + w.blocksize - 1) / w.blocksize,
      "NF4 weight [", w.rows, ", ", w.cols, "]: expected ", (n + 1) / 2, " packed bytes and ",
      (n + w.blocksize - 1) / w.blocksize, " scales, got ", w.packed.numel(), " and ",
      w.absmax.numel());
}

}  // namespace

const std::array<float, 16>& nf4_code() {
  static const std::array<float, 16> code = {
      -1.0f,
      -0.6961928009986877f,
      -0.5250730514526367f,
      -0.39491748809814453f,
      -0.28444138169288635f,
      -0.18477343022823334f,
      -0.09105003625154495f,
      0.0f,
      0.07958029955625534f,
      0.16093020141124725f,
      0.24611230194568634f,
      0.33791524171829224f,
      0.44070982933044434f,
      0.5626170039176941f,
      0.7229568362236023f,
      1.0f,
  };
  return code;
}

Nf4Weight quantize_nf4(const at::Tensor& weight, int64_t blocksize) {
  TITAN_CHECK(weight.dim() == 1 || weight.dim() == 2, "NF4 quantises 1-D or 2-D weights, got ",
              weight.sizes());
  TITAN_CHECK(blocksize > 0, "NF4 blocksize must be positive, got ", blocksize);
  Nf4Weight out;
  out.rows = weight.dim() == 2 ? weight.size(0) : 1;
  out.cols = weight.size(-1);
  out.blocksize = blocksize;
  const at::Tensor flat = weight.detach().to(at::kCPU, at::kFloat).contiguous().reshape({-1});
  const int64_t n = flat.numel();
  const int64_t blocks = (n + blocksize - 1) / blocksize;
  out.absmax = at::empty({blocks}, at::kFloat);
  out.packed = at::zeros({(n + 1) / 2}, at::kByte);
  const float* x = flat.const_data_ptr<float>();
  float* absmax = out.absmax.mutable_data_ptr<float>();
  uint8_t* packed = out.packed.mutable_data_ptr<uint8_t>();
  const int64_t full = n / blocksize;
  // Blocks of an even size start on a byte, so threads never share one; odd sizes run serially.
  const int64_t grain = blocksize % 2 == 0 ? 16 : blocks;
  at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * blocksize, count = std::min(blocksize, n - first);
      float m = 0.0f;
      for (int64_t i = 0; i < count; ++i) m = std::max(m, std::fabs(x[first + i]));
      // Full blocks multiply by the reciprocal of the (floored) absmax and keep the absmax
      // itself; a last, short block divides by the floored absmax and keeps that.
      const float floored = std::max(m, 1e-38f);
      const bool short_block = b >= full;
      absmax[b] = short_block ? floored : m;
      const float reciprocal = 1.0f / floored;
      for (int64_t i = 0; i < count; ++i) {
        const float v = short_block ? x[first + i] / floored : x[first + i] * reciprocal;
        const uint8_t q = nf4_index(std::clamp(v, -1.0f, 1.0f));
        const int64_t e = first + i;
        packed[e >> 1] |= (e & 1) ? q : static_cast<uint8_t>(q << 4);
      }
    }
  });
  if (n % 2 == 1) packed[n >> 1] |= nf4_index(0.0f);  // the padding element is a zero
  return out;
}

void dequantize_nf4_rows_cpu(const Nf4Weight& w, int64_t begin, at::Tensor& out) {
  // Named for the profiler (profiling.* traces): nf4_linear's tiles spend their time here and in
  // their GEMMs.
  RECORD_FUNCTION("titan::nf4_dequantize", std::vector<c10::IValue>({out}));
  check_weight(w);
  const int64_t rows = out.size(0), cols = w.cols;
  TITAN_CHECK(out.dim() == 2 && out.size(1) == cols && out.is_contiguous() && out.is_cpu(),
              "NF4 rows: the output must be a contiguous CPU [n, ", cols, "] tensor");
  TITAN_CHECK(begin >= 0 && begin + rows <= w.rows, "NF4 rows [", begin, ", ", begin + rows,
              ") outside a weight of ", w.rows, " rows");
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1));
  at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    const int64_t first = (begin + r0) * cols, count = (r1 - r0) * cols;
    switch (out.scalar_type()) {
      case at::kFloat:
        dequantize_range_fast(w, first, count, out.mutable_data_ptr<float>() + r0 * cols);
        break;
      case at::kBFloat16:
        dequantize_range_fast(w, first, count, out.mutable_data_ptr<c10::BFloat16>() + r0 * cols);
        break;
      case at::kHalf:
        dequantize_range(w, first, count, out.mutable_data_ptr<c10::Half>() + r0 * cols);
        break;
      default:
        TITAN_CHECK(false, "NF4 rows: unsupported output dtype ", out.scalar_type());
    }
  });
}

at::Tensor dequantize_nf4(const Nf4Weight& w, at::ScalarType dtype) {
  check_weight(w);
  const bool cuda = w.packed.is_cuda();
  const Nf4Weight host =
      cuda ? Nf4Weight{w.packed.cpu(), w.absmax.cpu(), w.rows, w.cols, w.blocksize} : w;
  at::Tensor out = at::empty({w.rows, w.cols}, at::TensorOptions(at::kFloat));
  dequantize_nf4_rows_cpu(host, 0, out);
  out = out.to(dtype);
  return cuda ? out.to(w.packed.device()) : out;
}

QuantizedScales quantize_scales(const at::Tensor& absmax_in) {
  const at::Tensor absmax = absmax_in.detach().to(at::kCPU, at::kFloat).contiguous();
  QuantizedScales out;
  out.offset = absmax.mean();
  const at::Tensor centred = (absmax - out.offset).contiguous();
  const int64_t n = centred.numel();
  const int64_t blocks = (n + kScaleBlockSize - 1) / kScaleBlockSize;
  out.codes = at::empty({n}, at::kByte);
  out.absmax = at::empty({blocks}, at::kFloat);
  // The search reads the map with its first value at -1 (bitsandbytes' CPU quantiser sets it so
  // for its binary search), the nearest value wins, ties to the lower index.
  std::vector<float> code(dynamic_map().const_data_ptr<float>(),
                          dynamic_map().const_data_ptr<float>() + 256);
  code[0] = -1.0f;
  const float* x = centred.const_data_ptr<float>();
  uint8_t* codes = out.codes.mutable_data_ptr<uint8_t>();
  float* block_absmax = out.absmax.mutable_data_ptr<float>();
  at::parallel_for(0, blocks, 16, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * kScaleBlockSize, count = std::min(kScaleBlockSize, n - first);
      float m = -std::numeric_limits<float>::max();
      for (int64_t i = 0; i < count; ++i) m = std::fmax(m, std::fabs(x[first + i]));
      block_absmax[b] = m;
      for (int64_t i = 0; i < count; ++i) {
        const float normed = x[first + i] / m;
        // The last map value not above `normed` (the first when every value is above it, or
        // when a block of zeros makes it 0 / 0).
        int64_t idx = std::upper_bound(code.begin(), code.end(), normed) - code.begin() - 1;
        if (std::isnan(normed)) idx = 0;
        idx = std::max<int64_t>(idx, 0);
        if (idx < 255 && std::fabs(normed - code[idx + 1]) < std::fabs(normed - code[idx])) ++idx;
        codes[first + i] = static_cast<uint8_t>(idx);
      }
    }
  });
  return out;
}

at::Tensor dequantize_scales(const QuantizedScales& s) {
  const at::Tensor codes = s.codes.to(at::kCPU).contiguous();
  const at::Tensor absmax = s.absmax.to(at::kCPU, at::kFloat).contiguous();
  const int64_t n = codes.numel();
  at::Tensor out = at::empty({n}, at::kFloat);
  const uint8_t* c = codes.const_data_ptr<uint8_t>();
  const float* a = absmax.const_data_ptr<float>();
  const float* map = dynamic_map().const_data_ptr<float>();
  float* o = out.mutable_data_ptr<float>();
  // Every forward of an NF4 weight with double-quantised scales comes here: on all cores.
  at::parallel_for(0, n, 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) o[i] = map[c[i]] * a[i / kScaleBlockSize];
  });
  out.add_(s.offset.to(at::kCPU, at::kFloat));
  return out.to(s.codes.device());
}

int64_t nf4_bytes(const Nf4Weight& w) {
  return w.packed.numel() + w.absmax.numel() * static_cast<int64_t>(w.absmax.element_size());
}

#ifdef TITAN_NF4_AVX512
namespace cpu::nf4_avx512 {

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
}

const float* code_values() { return nf4_code().data(); }

}  // namespace cpu::nf4_avx512
#endif

}  // namespace titan::kernels
