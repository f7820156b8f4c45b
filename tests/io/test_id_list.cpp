// parse_id_list / read_id_list (io/id_list.h): the --draft-vocab file format. Every accepted form
// reads the same ids; every malformed one fails with an Error naming the line.
#include <gtest/gtest.h>

#include "io/id_list.h"
#include "io_test_util.h"

namespace specserve {
namespace {

using Ids = std::vector<int32_t>;

TEST(IdList, ReadsLinesSpacesCommasAndJsonArrays) {
  EXPECT_EQ(parse_id_list("5\n3\n3\n"), (Ids{5, 3, 3}));  // order and duplicates kept
  EXPECT_EQ(parse_id_list("[0, 1,2 ,\n 151643]"), (Ids{0, 1, 2, 151643}));
  EXPECT_EQ(parse_id_list("# the most frequent ids\n13 220\t1000\r\n"), (Ids{13, 220, 1000}));
  EXPECT_EQ(parse_id_list("2147483647"), (Ids{2147483647}));
  EXPECT_EQ(parse_id_list(""), Ids{});
  EXPECT_EQ(parse_id_list("[]"), Ids{});
}

void expect_refused(const std::string& text, const std::string& fragment) {
  try {
    parse_id_list(text);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(IdList, RefusesWhatIsNotAnId) {
  expect_refused("1\n-2", "line 2");
  expect_refused("1.5", "not a token id");
  expect_refused("2147483648", "not a token id");
  expect_refused("99999999999999999999999", "not a token id");
  expect_refused("12abc", "not a token id");
  expect_refused("[1, 2", "'[' without ']'");
  expect_refused("1]", "']' without '['");
  expect_refused("[1] 2", "after the closing ']'");
  expect_refused("[[1]]", "only one '['");
  expect_refused("\"hello\"", "unexpected");
  expect_refused(std::string("1\n\x01", 3), "\\x01");  // control bytes are escaped in the message
}

TEST(IdList, ReadsAFileAndNamesItInErrors) {
  test::TempDir dir;
  test::write_bytes(dir.file("ids.txt"), "[7, 8]\n");
  EXPECT_EQ(read_id_list(dir.file("ids.txt")), (Ids{7, 8}));
  test::write_bytes(dir.file("bad.txt"), "7\nx\n");
  try {
    read_id_list(dir.file("bad.txt"));
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.txt: id list, line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_id_list(dir.file("missing.txt")), Error);
}

}  // namespace
}  // namespace specserve
