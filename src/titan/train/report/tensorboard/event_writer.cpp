#include "titan/train/report/tensorboard/event_writer.h"

#include <unistd.h>

#include <boost/crc.hpp>
#include <chrono>
#include <filesystem>

#include "titan/common/error.h"
#include "titan/train/report/tensorboard/event.pb.h"

namespace titan::train {
namespace {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// TFRecord's checksum: CRC-32C (Castagnoli), rotated and offset ("masked") so that a CRC of
// data that itself holds CRCs is not degenerate.
uint32_t masked_crc32c(const void* data, size_t size) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, size);
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

template <typename T>
void append_le(std::string& out, T value) {  // little-endian, as TFRecord stores integers
  for (size_t i = 0; i < sizeof(T); ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

EventWriter::EventWriter(const std::string& folder) {
  std::filesystem::create_directories(folder);
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  path_ = folder + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(now_seconds())) +
          "." + host + "." + std::to_string(::getpid()) + ".titan";
  out_.open(path_, std::ios::binary | std::ios::app);
  TITAN_CHECK(out_.good(), "cannot write TensorBoard events file ", path_);
  tensorboard::Event version;
  version.set_wall_time(now_seconds());
  version.set_file_version("brain.Event:2");
  write_record(version.SerializeAsString());
}

void EventWriter::add_scalars(int64_t step,
                              const std::vector<std::pair<std::string, double>>& scalars) {
  tensorboard::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  for (const auto& [tag, value] : scalars) {
    tensorboard::SummaryValue* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  write_record(event.SerializeAsString());
}

void EventWriter::write_record(const std::string& bytes) {
  std::string header;
  append_le<uint64_t>(header, bytes.size());
  std::string record = header;
  append_le<uint32_t>(record, masked_crc32c(header.data(), header.size()));
  record += bytes;
  append_le<uint32_t>(record, masked_crc32c(bytes.data(), bytes.size()));
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  out_.flush();
  TITAN_CHECK(out_.good(), "cannot write TensorBoard events file ", path_);
}

}  // namespace titan::train
