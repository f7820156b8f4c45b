#pragma once
// A list of token ids from a user's file (--draft-vocab FILE): non-negative decimal integers
// separated by whitespace or commas, optionally inside one pair of brackets, so a JSON array of ids
// and a file of one id per line both read. Lines starting with '#' are comments. Anything else
// (signs, fractions, an id above 2^31 - 1, a stray character) fails with an Error that names the line
// and the text found; the result keeps the file's order and duplicates.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specserve {

std::vector<int32_t> parse_id_list(std::string_view text);
// The file at `path` through parse_id_list (Error "cannot read PATH", or the parser's, naming PATH).
std::vector<int32_t> read_id_list(const std::string& path);

}  // namespace specserve
