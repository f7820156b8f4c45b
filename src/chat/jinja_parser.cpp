#include "chat/jinja_parser.h"

#include "chat/jinja_parser_impl.h"

// parse(): the lexer's tokens through the recursive-descent Parser (jinja_parser_impl.h).
namespace specserve::chat::jinja {

Body parse(std::string_view source) { return Parser(lex(source)).parse_template(); }

}  // namespace specserve::chat::jinja
