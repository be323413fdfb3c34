#include "titan/checkpoint/dcp_writer.h"

#include <filesystem>

#include "titan/checkpoint/dcp_metadata.h"
#include "titan/checkpoint/dcp_reader.h"
#include "titan/checkpoint/pickle_writer.h"
#include "titan/checkpoint/torch_save_archive.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"

namespace fs = std::filesystem;

namespace titan::checkpoint {
namespace {

constexpr const char* kDataFile = "__0_0.distcp";

// torch's legacy storage class of a dtype, as torch.save names it in data.pkl.
std::string storage_class(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "FloatStorage";
    case at::kDouble:
      return "DoubleStorage";
    case at::kHalf:
      return "HalfStorage";
    case at::kBFloat16:
      return "BFloat16Storage";
    case at::kLong:
      return "LongStorage";
    case at::kInt:
      return "IntStorage";
    case at::kShort:
      return "ShortStorage";
    case at::kChar:
      return "CharStorage";
    case at::kByte:
      return "ByteStorage";
    case at::kBool:
      return "BoolStorage";
    default:
      fail("a DCP checkpoint written by titan cannot hold dtype ", type);
  }
}

// torch.save(tensor)'s data.pkl for a contiguous tensor in storage "0":
// _rebuild_tensor_v2(('storage', torch.XStorage, '0', 'cpu', numel), 0, size, stride, False,
// OrderedDict()).
std::string tensor_pickle(const at::Tensor& t) {
  pickle::PickleWriter p;
  p.global("torch._utils", "_rebuild_tensor_v2");
  p.mark();
  p.mark();
  p.string("storage");
  p.global("torch", storage_class(t.scalar_type()));
  p.string("0");
  p.string("cpu");
  p.integer(t.numel());
  p.end_tuple(5);
  p.binpersid();
  p.integer(0);
  p.integer_tuple(t.sizes().vec());
  p.integer_tuple(t.strides().vec());
  p.boolean(false);
  p.global("collections", "OrderedDict");
  p.empty_tuple();
  p.reduce();
  p.end_tuple(6);
  p.reduce();
  return p.finish();
}

const std::string kLittle = "little";
const std::string kVersion = "3\n";

}  // namespace

void DcpWriter::check_new(const std::string& fqn) const {
  for (const Entry& e : entries_) TITAN_CHECK(e.fqn != fqn, "DCP entry '", fqn, "' written twice");
}

void DcpWriter::add_tensor(const std::string& fqn, const at::Tensor& tensor,
                           std::vector<std::string> planner_path) {
  check_new(fqn);
  at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
  dcp_dtype_name(t.scalar_type());  // one that DCP names
  entries_.push_back({fqn, std::move(t), "", std::move(planner_path)});
}

void DcpWriter::add_item(const std::string& fqn, const nlohmann::json& value,
                         std::vector<std::string> planner_path) {
  pickle::PickleWriter p;
  p.json(value);
  add_pickled_item(fqn, p.finish(), std::move(planner_path));
}

void DcpWriter::add_pickled_item(const std::string& fqn, std::string pickle,
                                 std::vector<std::string> planner_path) {
  check_new(fqn);
  entries_.push_back({fqn, at::Tensor(), std::move(pickle), std::move(planner_path)});
}

void DcpWriter::write(const std::string& dir) const {
  write_directory_atomically(dir, [&](const std::string& staged) {
    DcpMetadata metadata;
    AtomicFile data((fs::path(staged) / kDataFile).string());
    uint64_t offset = 0;
    // Items first, then tensors, as torch's writer orders them.
    for (const bool tensors : {false, true}) {
      for (const Entry& e : entries_) {
        if (e.tensor.defined() != tensors) continue;
        std::vector<ArchiveEntry> records;
        std::string pkl = tensors ? tensor_pickle(e.tensor) : e.pickle;
        records.push_back({"data.pkl", pkl.data(), pkl.size()});
        records.push_back({"byteorder", kLittle.data(), kLittle.size()});
        if (tensors) {
          records.push_back({"data/0", e.tensor.data_ptr(),
                             static_cast<uint64_t>(e.tensor.numel()) * e.tensor.element_size()});
        }
        records.push_back({"version", kVersion.data(), kVersion.size()});
        const uint64_t length = write_torch_save_archive(data, records);
        std::vector<int64_t> offsets;
        if (tensors) {
          DcpTensorInfo info;
          info.dtype = dcp_dtype_name(e.tensor.scalar_type());
          info.size = e.tensor.sizes().vec();
          offsets.assign(info.size.size(), 0);
          info.chunks.push_back({offsets, info.size});
          metadata.tensors.emplace(e.fqn, std::move(info));
        } else {
          metadata.items.push_back(e.fqn);
        }
        metadata.storage[{e.fqn, offsets}] = {kDataFile, offset, length};
        if (!e.planner_path.empty()) metadata.planner_paths[e.fqn] = e.planner_path;
        offset += length;
      }
    }
    data.commit();
    write_file_atomic((fs::path(staged) / ".metadata").string(),
                      dcp_metadata_pickle(metadata, fs::absolute(dir).string()));
  });
}

}  // namespace titan::checkpoint
