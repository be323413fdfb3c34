// Flags of the subcommands that take plain "--flag value" arguments (not config overrides):
// each known flag once, "--flag=value" also accepted, unknown flags are errors that list the
// accepted ones.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace titan::cli {

// True when the arguments ask for the subcommand's help (--help or -h anywhere).
bool wants_help(const std::vector<std::string>& args);

class FlagParser {
 public:
  FlagParser(const std::vector<std::string>& args, const std::string& command,
             const std::vector<std::string>& value_flags,
             const std::vector<std::string>& bool_flags = {});
  bool has(const std::string& flag) const;
  std::string get(const std::string& flag, const std::string& fallback = "") const;
  std::string require(const std::string& flag) const;
  int64_t get_int(const std::string& flag, int64_t fallback) const;
  double get_double(const std::string& flag, double fallback) const;

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
};

}  // namespace titan::cli
