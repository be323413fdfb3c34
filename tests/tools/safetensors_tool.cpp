// Test-only driver for the safetensors reader/writer and the HF export, so pytest can compare
// them with Python's safetensors and transformers. Errors print one line and exit 1.
//
//   list IN                 JSON of metadata and tensors (name, dtype, shape, data_offsets)
//   copy IN OUT             read every tensor with SafetensorsFile, write them with
//                           write_safetensors (metadata preserved)
//   list-dir DIR            JSON list of the keys of a weights directory
//   gather DIR OUT          every tensor of a weights directory into one file
//   export-hf JOB.json      export_hf_directory of the tensors in job["weights"] (in the order
//                           job["order"]) with job["config"], job["dtype"], job["max_shard_size"],
//                           job["tokenizer_dir"] into job["out"]
//   parse-size TEXT         prints titan::checkpoint::parse_size(TEXT)
//   bench IN OUT REPEATS    timings: read (open + copy every byte into preallocated tensors)
//                           and write (write_safetensors, fsync included), as JSON
//   nf4 IN OUT              each tensor T of IN quantised to NF4 (kernels/nf4.h): OUT holds
//                           T.packed, T.absmax, T.dequantized, and the double quantisation of
//                           its scales: T.scale_codes, T.scale_absmax, T.scale_offset and
//                           T.dequantized_double (dequantised through those scales)
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "tensor_list_model.h"
#include "titan/checkpoint/hf_export.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"
#include "titan/kernels/nf4.h"

namespace {

using titan::checkpoint::SafetensorsDirectory;
using titan::checkpoint::SafetensorsFile;
using Named = std::vector<std::pair<std::string, at::Tensor>>;

Named read_all(const SafetensorsFile& file) {
  Named tensors;
  for (const auto& info : file.tensors()) tensors.emplace_back(info.name, file.tensor(info.name));
  return tensors;
}

int list(const std::string& in) {
  SafetensorsFile file = SafetensorsFile::open(in);
  nlohmann::json out = {{"metadata", file.metadata()}, {"tensors", nlohmann::json::array()}};
  for (const auto& t : file.tensors()) {
    out["tensors"].push_back({{"name", t.name},
                              {"dtype", t.dtype},
                              {"shape", t.shape},
                              {"data_offsets", {t.begin, t.end}}});
  }
  std::cout << out.dump() << "\n";
  return 0;
}

int copy(const std::string& in, const std::string& out) {
  SafetensorsFile file = SafetensorsFile::open(in);
  titan::checkpoint::write_safetensors(out, read_all(file), file.metadata());
  return 0;
}

int list_dir(const std::string& dir) {
  std::cout << nlohmann::json(SafetensorsDirectory::open(dir).keys()).dump() << "\n";
  return 0;
}

int gather(const std::string& dir, const std::string& out) {
  SafetensorsDirectory weights = SafetensorsDirectory::open(dir);
  Named tensors;
  for (const std::string& key : weights.keys()) tensors.emplace_back(key, weights.tensor(key));
  titan::checkpoint::write_safetensors(out, tensors);
  return 0;
}

int export_hf(const std::string& job_path) {
  const nlohmann::json job = nlohmann::json::parse(titan::read_text_file(job_path));
  SafetensorsFile weights = SafetensorsFile::open(job.at("weights").get<std::string>());
  titan::NamedTensors tensors;
  for (const auto& name : job.at("order")) {
    tensors.emplace_back(name.get<std::string>(), weights.tensor(name.get<std::string>()));
  }
  titan::test_support::TensorListModel model(std::move(tensors), job.at("config"));
  titan::checkpoint::export_hf_directory(
      model, titan::test_support::identity_spec(), job.at("out").get<std::string>(),
      job.at("dtype").get<std::string>(),
      titan::checkpoint::parse_size(job.at("max_shard_size").get<std::string>()),
      job.value("tokenizer_dir", std::string()));
  return 0;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int bench(const std::string& in, const std::string& out, int repeats) {
  // Destination tensors allocated and touched once, outside the timings.
  Named destination;
  uint64_t bytes = 0;
  {
    SafetensorsFile file = SafetensorsFile::open(in);
    for (const auto& info : file.tensors()) {
      at::Tensor t = at::empty(
          info.shape,
          at::TensorOptions().dtype(titan::checkpoint::scalar_type_from_safetensors(info.dtype)));
      t.zero_();
      destination.emplace_back(info.name, t);
      bytes += info.end - info.begin;
    }
  }
  nlohmann::json result = {
      {"bytes", bytes}, {"read_s", nlohmann::json::array()}, {"write_s", nlohmann::json::array()}};
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    SafetensorsFile file = SafetensorsFile::open(in);
    for (auto& [name, t] : destination) t.copy_(file.tensor(name));
    result["read_s"].push_back(seconds_since(start));
  }
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    titan::checkpoint::write_safetensors(out, destination);
    result["write_s"].push_back(seconds_since(start));
  }
  std::cout << result.dump() << "\n";
  return 0;
}

int nf4(const std::string& in, const std::string& out) {
  const SafetensorsFile file = SafetensorsFile::open(in);
  Named tensors;
  for (const auto& info : file.tensors()) {
    const at::Tensor w = file.tensor(info.name);
    titan::kernels::Nf4Weight q = titan::kernels::quantize_nf4(w);
    tensors.emplace_back(info.name + ".packed", q.packed);
    tensors.emplace_back(info.name + ".absmax", q.absmax);
    tensors.emplace_back(info.name + ".dequantized", titan::kernels::dequantize_nf4(q));
    const titan::kernels::QuantizedScales s = titan::kernels::quantize_scales(q.absmax);
    tensors.emplace_back(info.name + ".scale_codes", s.codes);
    tensors.emplace_back(info.name + ".scale_absmax", s.absmax);
    tensors.emplace_back(info.name + ".scale_offset", s.offset.reshape({1}));
    q.absmax = titan::kernels::dequantize_scales(s);
    tensors.emplace_back(info.name + ".dequantized_double", titan::kernels::dequantize_nf4(q));
  }
  titan::checkpoint::write_safetensors(out, tensors);
  return 0;
}

int usage() {
  std::cerr << "usage: titan_safetensors_tool list IN | copy IN OUT | list-dir DIR | "
               "gather DIR OUT | export-hf JOB.json | parse-size TEXT | bench IN OUT REPEATS | "
               "nf4 IN OUT\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return usage();
  try {
    const std::string& mode = args[0];
    if (mode == "list" && args.size() == 2) return list(args[1]);
    if (mode == "copy" && args.size() == 3) return copy(args[1], args[2]);
    if (mode == "list-dir" && args.size() == 2) return list_dir(args[1]);
    if (mode == "gather" && args.size() == 3) return gather(args[1], args[2]);
    if (mode == "export-hf" && args.size() == 2) return export_hf(args[1]);
    if (mode == "parse-size" && args.size() == 2) {
      std::cout << titan::checkpoint::parse_size(args[1]) << "\n";
      return 0;
    }
    if (mode == "bench" && args.size() == 4) return bench(args[1], args[2], std::stoi(args[3]));
    if (mode == "nf4" && args.size() == 3) return nf4(args[1], args[2]);
    return usage();
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
