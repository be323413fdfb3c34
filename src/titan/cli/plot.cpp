// titan plot METRICS.jsonl --output loss.png [--title NAME] [--python EXE]
//
// Draws a run's metrics with matplotlib: the script (plot_metrics.py, compiled in) runs in
// the Python titan was built with (the venv), or --python / $TITAN_PYTHON.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>

#include "titan/cli/commands.h"
#include "titan/cli/flag_parser.h"
#include "titan/cli/plot_metrics_py.h"
#include "titan/common/error.h"

namespace titan::cli {
namespace {

constexpr const char* kHelp =
    R"(usage: titan plot METRICS.jsonl --output loss.png [--title NAME] [--python EXE]

Plots loss (and validation loss), learning rate, tokens/s and memory over steps from a run's
metrics.jsonl (finished or still running) into a PNG of 1200 x 800 pixels. The title defaults
to the run's job.description from the config.toml beside the metrics file.
)";

// job.description from <folder>/config.toml, else the folder's name.
std::string run_name(const std::filesystem::path& metrics) {
  const std::filesystem::path folder = metrics.parent_path();
  std::ifstream toml(folder / "config.toml");
  const std::regex description(R"re(^description\s*=\s*"(.*)"\s*$)re");
  for (std::string line; std::getline(toml, line);) {
    std::smatch m;
    if (std::regex_match(line, m, description)) return m[1];
  }
  return folder.filename().string();
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

int run_plot(const Args& args) {
  if (wants_help(args) || args.empty()) {
    std::cout << kHelp;
    return args.empty() ? 2 : 0;
  }
  Args rest = args;
  std::string metrics;
  if (!rest.front().starts_with("--")) {
    metrics = rest.front();
    rest.erase(rest.begin());
  }
  const FlagParser flags(rest, "plot", {"--output", "--title", "--python", "--metrics"});
  if (metrics.empty()) metrics = flags.require("--metrics");
  const std::string output = flags.require("--output");
  TITAN_CHECK(std::filesystem::exists(metrics), "metrics file ", metrics, " does not exist");
  const std::string title = flags.get("--title", run_name(metrics));
  const char* env_python = std::getenv("TITAN_PYTHON");
  const std::string python =
      flags.get("--python", env_python != nullptr ? env_python : TITAN_PYTHON_EXECUTABLE);

  const std::string command = shell_quote(python) + " - " + shell_quote(metrics) + " " +
                              shell_quote(output) + " " + shell_quote(title);
  FILE* pipe = ::popen(command.c_str(), "w");
  TITAN_CHECK(pipe != nullptr, "cannot run ", python, " for titan plot");
  std::fputs(kPlotMetricsSource, pipe);
  const int status = ::pclose(pipe);
  const int code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  // plot_metrics.py's own exit statuses (see its header).
  TITAN_CHECK(
      code != 3, "titan plot: ", metrics,
      " holds no complete metrics record (expected a run's metrics.jsonl: one JSON object with a "
      "\"step\" per line)");
  TITAN_CHECK(code != 4, "titan plot: ", python,
              " has no matplotlib (run scripts/setup, or give --python EXE of a Python with it)");
  TITAN_CHECK(code == 0, "titan plot: ", python, " could not draw ", metrics, " (exit status ",
              code, "; its message is above)");
  return 0;
}

}  // namespace titan::cli
