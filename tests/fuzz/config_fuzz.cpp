// The config layer on arbitrary text: as a TOML overlay (--config-file) when the first byte is
// even, else as command-line overrides, one "section.key=value" per line. Bad input throws
// titan::Error; an accepted config prints as TOML that reads back to the same config.
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_input.h"
#include "titan/common/error.h"
#include "titan/config/config_fields.h"
#include "titan/config/toml_overlay.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  titan::config::TrainerConfig config;
  try {
    if (data[0] % 2 == 0) {
      titan::config::apply_toml_text(config, text, "fuzz.toml");
    } else {
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        const auto eq = line.find('=');
        if (eq == std::string::npos) continue;
        const auto [section, key] =
            titan::config::split_dotted_key(line.substr(0, eq), "--" + line.substr(0, eq));
        if (titan::config::is_bool_field(section, key, "--" + line.substr(0, eq)) &&
            eq + 1 == line.size())
          continue;
        titan::config::set_field_from_string(config, section, key, line.substr(eq + 1),
                                             "--" + line.substr(0, eq));
      }
    }
  } catch (const titan::Error&) {
    return 0;
  }
  const std::string printed = titan::config::to_toml(config);
  titan::config::TrainerConfig reread;
  titan::config::apply_toml_text(reread, printed, "printed.toml");
  titan::fuzz::require(titan::config::to_toml(reread) == printed);
  return 0;
}
