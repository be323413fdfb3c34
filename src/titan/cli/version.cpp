// titan --version: what a bug report needs to name the build.
#include <torch/version.h>

#include <iostream>

#include "titan/cli/commands.h"
#include "titan/cli/git_commit.h"

namespace titan::cli {

int run_version(const Args&) {
  std::cout << "titan " << TITAN_VERSION << " (commit " << TITAN_GIT_COMMIT << ", torch "
            << TORCH_VERSION << ")" << std::endl;
  return 0;
}

}  // namespace titan::cli
