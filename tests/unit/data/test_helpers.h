// Shared pieces of the data room's unit tests: the real Qwen3 tokenizer (loaded once) and
// temporary dataset files.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <unistd.h>

#include "source_dir.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data::testing {

inline std::string tokenizer_dir() {
  return ::titan::testing::source_dir() + "/assets/qwen3-tokenizer";
}

// Loading the 11 MB tokenizer.json takes a moment: share one instance.
inline std::shared_ptr<const Tokenizer> qwen3_tokenizer() {
  static const auto tok =
      std::make_shared<const Tokenizer>(Tokenizer::from_directory(tokenizer_dir()));
  return tok;
}

// A file under a fresh temporary folder, removed with the object.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& content) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("titan_data_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / name).string();
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { std::filesystem::remove_all(dir_); }
  const std::string& path() const { return path_; }
  std::filesystem::path dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

}  // namespace titan::data::testing
