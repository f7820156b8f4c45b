#include "chat/jinja_template.h"

#include "chat/jinja_parser.h"

namespace specserve::chat::jinja {

Template Template::parse(std::string_view source) {
  Template t;
  t.body_ = std::make_shared<const Body>(jinja::parse(source));
  return t;
}

std::string Template::render(const Dict& context, const RenderLimits& limits) const {
  Interpreter interp(limits);
  return interp.render(*body_, context);
}

}  // namespace specserve::chat::jinja
