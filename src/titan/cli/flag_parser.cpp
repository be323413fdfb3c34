#include "titan/cli/flag_parser.h"

#include <algorithm>

#include "titan/common/error.h"
#include "titan/config/field_values.h"

namespace titan::cli {

bool wants_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& a) { return a == "--help" || a == "-h"; });
}

FlagParser::FlagParser(const std::vector<std::string>& args, const std::string& command,
                       const std::vector<std::string>& value_flags,
                       const std::vector<std::string>& bool_flags)
    : command_(command) {
  auto known = [](const std::vector<std::string>& v, const std::string& f) {
    return std::find(v.begin(), v.end(), f) != v.end();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_value = false;
    if (const auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    if (known(bool_flags, flag)) {
      values_[flag] = has_value ? value : "true";
    } else if (known(value_flags, flag)) {
      if (!has_value) {
        TITAN_CHECK(i + 1 < args.size(), "titan ", command, ": ", flag, " needs a value");
        value = args[++i];
      }
      values_[flag] = value;
    } else {
      std::string accepted;
      for (const auto& f : value_flags) accepted += " " + f;
      for (const auto& f : bool_flags) accepted += " " + f;
      fail("titan ", command, ": unknown argument '", args[i], "'; accepted:", accepted);
    }
  }
}

bool FlagParser::has(const std::string& flag) const { return values_.count(flag) > 0; }

std::string FlagParser::get(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second;
}

std::string FlagParser::require(const std::string& flag) const {
  TITAN_CHECK(has(flag), "titan ", command_, ": ", flag, " is required (see --help)");
  return get(flag);
}

int64_t FlagParser::get_int(const std::string& flag, int64_t fallback) const {
  if (!has(flag)) return fallback;
  const std::string v = get(flag);
  int64_t out = 0;
  TITAN_CHECK(config::parse_int64(v, out), "titan ", command_, ": ", flag,
              " expects an integer, got '", v, "'");
  return out;
}

double FlagParser::get_double(const std::string& flag, double fallback) const {
  if (!has(flag)) return fallback;
  const std::string v = get(flag);
  double out = 0;
  TITAN_CHECK(config::parse_double(v, out), "titan ", command_, ": ", flag,
              " expects a number, got '", v, "'");
  return out;
}

}  // namespace titan::cli
