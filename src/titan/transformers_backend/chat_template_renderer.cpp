// The chat-template renderer of SFT (data/chat_template.h): the template compiled once by
// chat_template.py in the embedded interpreter; each render takes the GIL for its call only, so
// the loader's prefetch thread may render while the training thread runs.
#include <pybind11/embed.h>

#include "titan/common/error.h"
#include "titan/data/chat_template.h"
#include "titan/transformers_backend/chat_template_py.h"
#include "titan/transformers_backend/python_runtime.h"

namespace py = pybind11;

namespace titan::transformers_backend {
namespace {

class PythonChatTemplate : public data::ChatTemplate {
 public:
  PythonChatTemplate(const std::string& source, std::string special_tokens_json)
      : special_tokens_json_(std::move(special_tokens_json)) {
    ensure_python();
    py::gil_scoped_acquire gil;
    try {
      py::module_ m = py::module_::create_extension_module("titan_chat_template", nullptr,
                                                           new py::module_::module_def);
      py::exec(kChatTemplateSource, m.attr("__dict__"));
      render_ = new py::object(m.attr("render"));
      template_ = new py::object(m.attr("compile_template")(source));
    } catch (const py::error_already_set& e) {
      fail("the chat template does not compile: ", describe(e));
    }
  }

  // The Python objects are left to the interpreter, which outlives every template: destroying
  // them needs the GIL, and at exit the interpreter may already be finalizing.
  ~PythonChatTemplate() override = default;

  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt,
                     const nlohmann::ordered_json& template_kwargs) const override {
    const std::string messages_json = messages.dump(), tools_json = tools.dump();
    const std::string kwargs_json = template_kwargs.is_null() ? "{}" : template_kwargs.dump();
    py::gil_scoped_acquire gil;
    try {
      return (*render_)(*template_, special_tokens_json_, messages_json, tools_json,
                        add_generation_prompt, kwargs_json)
          .cast<std::string>();
    } catch (const py::error_already_set& e) {
      fail("the chat template failed: ", describe(e));
    }
  }

 private:
  std::string special_tokens_json_;
  py::object* render_ = nullptr;
  py::object* template_ = nullptr;
};

}  // namespace
}  // namespace titan::transformers_backend

extern "C" titan::data::ChatTemplate* titan_make_chat_template(const char* source,
                                                               const char* special_tokens_json) {
  return new titan::transformers_backend::PythonChatTemplate(source, special_tokens_json);
}
