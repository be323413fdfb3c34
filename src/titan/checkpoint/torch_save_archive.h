// The archive torch.save writes: an uncompressed ("stored") zip whose records sit under one
// folder (archive/data.pkl, archive/data/0, archive/version, ...), payloads aligned to 64
// bytes. A DCP checkpoint's __R_S.distcp files are such archives back to back, one per item.
// The reader takes the sizes from the central directory (torch's local headers carry none)
// and checks every offset against the bytes it was given; the writer writes what torch's
// reader requires (the version record among them), with zip64 records where sizes need them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "titan/common/file_util.h"

namespace titan::checkpoint {

struct ArchiveRecord {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

// The records of the archive in [data, data + size), by name without the archive's folder
// ("data.pkl", "data/0", "byteorder"). Throws titan::Error naming `source` when it is not a
// stored zip or a record lies outside it.
std::map<std::string, ArchiveRecord> read_torch_save_archive(const uint8_t* data, uint64_t size,
                                                             const std::string& source);

struct ArchiveEntry {
  std::string name;  // without the folder: "data.pkl"
  const void* data = nullptr;
  uint64_t size = 0;
};

// Appends one archive (records under "archive/") to `out`; returns its length in bytes.
uint64_t write_torch_save_archive(AtomicFile& out, const std::vector<ArchiveEntry>& entries);

}  // namespace titan::checkpoint
