#pragma once
// A compiled Jinja template (the subset chat templates use), rendered with the environment
// transformers uses for chat templates. Parsing and rendering errors are specserve::Error with a
// one-line message; rendering is bounded (RenderLimits), so no template can crash or hang.
#include <memory>
#include <string>
#include <string_view>

#include "chat/jinja_interpreter.h"
#include "chat/jinja_value.h"

namespace specserve::chat::jinja {

class Template {
 public:
  static Template parse(std::string_view source);
  std::string render(const Dict& context, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace specserve::chat::jinja
