// Parquet files and Arrow IPC files (HF datasets' save_to_disk) as document sources: the rows are
// the documents, their text the string column named by training.dataset_text_field. This header
// names no Arrow type, so document_source.cpp (and the sanitized build, which has no Arrow) can
// include it; a titan built without pyarrow links arrow_sources_unavailable.cpp instead.
#pragma once

#include <memory>
#include <string>

#include "titan/data/document_source.h"

namespace titan::data {

// A .parquet file. Throws titan::Error naming the file when it is not Parquet, has no such
// column, or the column holds no strings.
std::unique_ptr<DocumentSource> open_parquet(const std::string& path,
                                             const std::string& text_field);
// A .arrow file, IPC stream format (what save_to_disk writes) or IPC file format; same errors.
std::unique_ptr<DocumentSource> open_arrow(const std::string& path, const std::string& text_field);

}  // namespace titan::data
