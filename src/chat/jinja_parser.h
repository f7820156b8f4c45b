#pragma once
// Jinja2 parser for the template subset (docs/MODELS.md §4.4 and what chat templates commonly use):
// statements for / if / elif / else / set (incl. block set and namespace attributes) / macro /
// call / filter / with / break / continue / generation, raw blocks, and the full expression
// grammar with Jinja's precedence (filters bind tighter than arithmetic, `~` between + and *).
// Unknown filters, tests and tags are errors at parse time, as Jinja reports them at compile time.
#include <string_view>

#include "chat/jinja_ast.h"

namespace specserve::chat::jinja {

// Throws specserve::Error ("template syntax error: line N: ...") for invalid templates.
Body parse(std::string_view source);

}  // namespace specserve::chat::jinja
