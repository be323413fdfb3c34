// One function per subcommand of `titan`; each lives in its own file in this folder and
// receives the arguments after the subcommand name. They return the process exit code and
// throw titan::Error for bad input (main prints it as one line).
#pragma once

#include <string>
#include <vector>

namespace titan::cli {

using Args = std::vector<std::string>;

int run_train(const Args& args);
int run_configs(const Args& args);
int run_forward(const Args& args);
int run_eval(const Args& args);
int run_generate(const Args& args);
int run_convert(const Args& args);
int run_tokenize(const Args& args);
int run_encode(const Args& args);
int run_render_chat(const Args& args);
int run_decode(const Args& args);
int run_plot(const Args& args);
int run_check_data(const Args& args);
int run_version(const Args& args);  // titan --version

}  // namespace titan::cli
