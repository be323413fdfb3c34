#include "titan/checkpoint/torch_save_archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "titan/common/error.h"

namespace titan::checkpoint {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEnd = 0x06054b50;
constexpr uint32_t kEnd64 = 0x06064b50;
constexpr uint32_t kEnd64Locator = 0x07064b50;
constexpr uint32_t k32Max = 0xffffffffu;
constexpr uint64_t kAlignment = 64;  // torch's payload alignment

// Little-endian fields, each read only after its bounds are checked.
class Bytes {
 public:
  Bytes(const uint8_t* data, uint64_t size, const std::string& source)
      : data_(data), size_(size), source_(source) {}
  uint64_t u(uint64_t at, int n) const {
    need(at, n);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{data_[at + i]} << (8 * i);
    return v;
  }
  void need(uint64_t at, uint64_t n) const {
    if (at > size_ || n > size_ - at)
      fail(source_, ": not a torch.save archive (a zip record at byte ", at, " lies past its end, ",
           size_, " bytes)");
  }
  const uint8_t* at(uint64_t offset) const { return data_ + offset; }
  uint64_t size() const { return size_; }

 private:
  const uint8_t* data_;
  uint64_t size_;
  const std::string& source_;
};

uint32_t crc32_of(const void* data, uint64_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {
    const uInt n = static_cast<uInt>(std::min<uint64_t>(size, 1u << 30));
    crc = crc32(crc, p, n);
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

void put(std::string& out, uint64_t value, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

std::map<std::string, ArchiveRecord> read_torch_save_archive(const uint8_t* data, uint64_t size,
                                                             const std::string& source) {
  const Bytes b(data, size, source);
  // The end record: its signature, searched backwards (a comment of up to 64 KiB may follow).
  if (size < 22) fail(source, ": not a torch.save archive (", size, " bytes)");
  uint64_t end = UINT64_MAX;
  const uint64_t lowest = size > 65557 ? size - 65557 : 0;
  for (uint64_t i = size - 21; i-- > lowest;) {
    if (b.u(i, 4) == kEnd) {
      end = i;
      break;
    }
  }
  if (end == UINT64_MAX) fail(source, ": not a torch.save archive (no zip end record)");
  uint64_t count = b.u(end + 10, 2);
  uint64_t directory = b.u(end + 16, 4);
  if (end >= 20 && b.u(end - 20, 4) == kEnd64Locator) {
    const uint64_t end64 = b.u(end - 20 + 8, 8);
    if (b.u(end64, 4) != kEnd64) fail(source, ": not a torch.save archive (bad zip64 record)");
    count = b.u(end64 + 32, 8);
    directory = b.u(end64 + 48, 8);
  }
  std::map<std::string, ArchiveRecord> records;
  uint64_t p = directory;
  for (uint64_t i = 0; i < count; ++i) {
    if (b.u(p, 4) != kCentralHeader)
      fail(source, ": not a torch.save archive (bad zip directory entry ", i, ")");
    const uint64_t method = b.u(p + 10, 2);
    uint64_t compressed = b.u(p + 20, 4), plain = b.u(p + 24, 4);
    const uint64_t name_length = b.u(p + 28, 2), extra_length = b.u(p + 30, 2),
                   comment_length = b.u(p + 32, 2);
    uint64_t local = b.u(p + 42, 4);
    b.need(p + 46, name_length + extra_length + comment_length);
    const std::string name(reinterpret_cast<const char*>(b.at(p + 46)), name_length);
    // zip64: 64-bit values for the 32-bit fields that are all ones, in this order.
    for (uint64_t x = p + 46 + name_length, x_end = x + extra_length; x + 4 <= x_end;) {
      const uint64_t id = b.u(x, 2), length = b.u(x + 2, 2);
      if (id == 1) {
        uint64_t field = x + 4;
        for (uint64_t* v : {&plain, &compressed, &local}) {
          if (*v != k32Max) continue;
          if (field + 8 > x + 4 + length) fail(source, ": bad zip64 field of ", name);
          *v = b.u(field, 8);
          field += 8;
        }
      }
      x += 4 + length;
    }
    p += 46 + name_length + extra_length + comment_length;
    if (method != 0 || compressed != plain)
      fail(source, ": record ", name, " is compressed (method ", method,
           "); torch.save archives are stored");
    if (b.u(local, 4) != kLocalHeader) fail(source, ": bad zip local header of ", name);
    const uint64_t start = local + 30 + b.u(local + 26, 2) + b.u(local + 28, 2);
    b.need(start, plain);
    // Records sit in one folder whose name torch does not fix.
    const size_t slash = name.find('/');
    records[slash == std::string::npos ? name : name.substr(slash + 1)] = {b.at(start), plain};
  }
  auto order = records.find("byteorder");
  if (order != records.end() && std::string(reinterpret_cast<const char*>(order->second.data),
                                            order->second.size) != "little")
    fail(source, ": a big-endian torch.save archive, which titan does not read");
  return records;
}

uint64_t write_torch_save_archive(AtomicFile& out, const std::vector<ArchiveEntry>& entries) {
  uint64_t written = 0;
  std::string directory;
  for (const ArchiveEntry& e : entries) {
    const std::string name = "archive/" + e.name;
    const uint32_t crc = crc32_of(e.data, e.size);
    const bool big = e.size >= k32Max;
    const bool far = written >= k32Max;
    // Local header: sizes (zip64 extra when they do not fit), then padding in an "FB" extra
    // field so that the payload starts on a 64-byte boundary, as torch writes it.
    std::string local;
    put(local, kLocalHeader, 4);
    put(local, big ? 45 : 20, 2);  // version needed
    put(local, 0, 2);              // flags
    put(local, 0, 2);              // stored
    put(local, 0, 4);              // time, date
    put(local, crc, 4);
    put(local, big ? k32Max : e.size, 4);
    put(local, big ? k32Max : e.size, 4);
    put(local, name.size(), 2);
    const uint64_t zip64_length = big ? 20 : 0;
    const uint64_t unpadded = written + 30 + name.size() + zip64_length + 4;
    const uint64_t pad = (kAlignment - unpadded % kAlignment) % kAlignment;
    put(local, zip64_length + 4 + pad, 2);
    local += name;
    if (big) {
      put(local, 1, 2);
      put(local, 16, 2);
      put(local, e.size, 8);
      put(local, e.size, 8);
    }
    put(local, 0x4246, 2);  // "FB"
    put(local, pad, 2);
    local.append(pad, 'Z');
    out.write(local);
    if (e.size > 0) out.write(e.data, e.size);
    // Its central directory entry.
    std::string zip64;
    if (big) {
      put(zip64, e.size, 8);
      put(zip64, e.size, 8);
    }
    if (far) put(zip64, written, 8);
    put(directory, kCentralHeader, 4);
    put(directory, 45, 2);  // made by
    put(directory, big || far ? 45 : 20, 2);
    put(directory, 0, 2);
    put(directory, 0, 2);
    put(directory, 0, 4);
    put(directory, crc, 4);
    put(directory, big ? k32Max : e.size, 4);
    put(directory, big ? k32Max : e.size, 4);
    put(directory, name.size(), 2);
    put(directory, zip64.empty() ? 0 : zip64.size() + 4, 2);
    put(directory, 0, 2);  // comment
    put(directory, 0, 2);  // disk
    put(directory, 0, 2);  // internal attributes
    put(directory, 0, 4);  // external attributes
    put(directory, far ? k32Max : written, 4);
    directory += name;
    if (!zip64.empty()) {
      put(directory, 1, 2);
      put(directory, zip64.size(), 2);
      directory += zip64;
    }
    written += local.size() + e.size;
  }
  // The directory, then zip64's end record and locator (as torch writes them always), then
  // the classic end record with all-ones where zip64 holds the values.
  const uint64_t directory_offset = written;
  std::string tail = directory;
  const uint64_t end64 = directory_offset + directory.size();
  put(tail, kEnd64, 4);
  put(tail, 44, 8);
  put(tail, 45, 2);
  put(tail, 45, 2);
  put(tail, 0, 4);
  put(tail, 0, 4);
  put(tail, entries.size(), 8);
  put(tail, entries.size(), 8);
  put(tail, directory.size(), 8);
  put(tail, directory_offset, 8);
  put(tail, kEnd64Locator, 4);
  put(tail, 0, 4);
  put(tail, end64, 8);
  put(tail, 1, 4);
  put(tail, kEnd, 4);
  put(tail, 0, 4);
  put(tail, std::min<uint64_t>(entries.size(), 0xffff), 2);
  put(tail, std::min<uint64_t>(entries.size(), 0xffff), 2);
  put(tail, std::min<uint64_t>(directory.size(), k32Max), 4);
  put(tail, std::min<uint64_t>(directory_offset, k32Max), 4);
  put(tail, 0, 2);
  out.write(tail);
  return written + tail.size();
}

}  // namespace titan::checkpoint
