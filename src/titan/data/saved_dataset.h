// Folders written by HF datasets' save_to_disk. A Dataset's folder holds dataset_info.json,
// state.json and data-NNNNN-of-MMMMM.arrow; state.json's "_data_files" lists those .arrow files
// in the dataset's order. Listing the folder instead would also pick up cache-*.arrow files that
// datasets writes next to them (results of map() or filter() on the loaded dataset), which are
// not the dataset. A DatasetDict's folder holds dataset_dict.json and one Dataset folder per split.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace titan::data {

// The data files of the saved Dataset in `folder`, in state.json's order, or nullopt when
// `folder` holds no state.json. Throws titan::Error naming state.json when it is unreadable, and
// naming `folder` when state.json lists no file (0 rows) or when it holds a DatasetDict (its splits
// must not be mixed: the dataset path must name one split's folder).
std::optional<std::vector<std::string>> saved_dataset_files(const std::string& folder);

}  // namespace titan::data
