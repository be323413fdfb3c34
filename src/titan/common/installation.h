// Where titan is installed: the folder whose assets/ holds the project's own default files
// (the tokenizer, the corpora), found from the running binary's location, so that the
// built-in defaults do not depend on the current directory (config/derived_defaults.h).
#pragma once

#include <string>

namespace titan {

// The running executable's path (/proc/self/exe), "" when unknown.
std::string executable_path();

// The nearest of the executable's folder and its three parents that holds an assets/ folder
// (for build/bin/titan: the clone), "" when none does.
std::string installation_root();

}  // namespace titan
