// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "test_support.hpp"
#include "twell/error.hpp"
#include "twell/tokens.hpp"

namespace {

/// The message of the twell::Error that parsing `text` throws (fails the test if none).
std::string parse_error(const std::string& text, std::uint32_t vocab = 100) {
  try {
    twell::parse_token_text(text, vocab, "tokens.txt");
  } catch (const twell::Error& e) {
    EXPECT_EQ(e.kind(), twell::Error::Kind::InvalidInput) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for: " << text;
  return {};
}

TEST(RandomTokens, SameSeedSameIdsOtherSeedOtherIds) {
  const auto a = twell::random_tokens(3, 50, 1000, 42);
  const auto b = twell::random_tokens(3, 50, 1000, 42);
  const auto c = twell::random_tokens(3, 50, 1000, 43);
  EXPECT_EQ(a.batch, 3u);
  EXPECT_EQ(a.sequence, 50u);
  ASSERT_EQ(a.count(), 150u);
  EXPECT_EQ(a.ids, b.ids);
  EXPECT_NE(a.ids, c.ids);
  EXPECT_NE(a.source.find("seed=42"), std::string::npos);
}

TEST(RandomTokens, CoverTheVocabularyUniformly) {
  const auto tokens = twell::random_tokens(16, 1024, 8, 7);
  std::size_t counts[8] = {};
  for (const auto id : tokens.ids) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 8);
    ++counts[id];
  }
  for (const auto count : counts) EXPECT_NEAR(static_cast<double>(count), 16.0 * 1024 / 8, 300.0);
}

TEST(RandomTokens, RejectEmptyShapes) {
  EXPECT_THROW(twell::random_tokens(1, 4, 0, 1), twell::Error);
  EXPECT_THROW(twell::random_tokens(0, 4, 10, 1), twell::Error);
  EXPECT_THROW(twell::random_tokens(1, 0, 10, 1), twell::Error);
}

TEST(TokenText, ParsesSequencesPerLine) {
  const auto tokens = twell::parse_token_text("1 2 3\n\t4  5 6\r\n\n", 10, "inline");
  EXPECT_EQ(tokens.batch, 2u);
  EXPECT_EQ(tokens.sequence, 3u);
  EXPECT_EQ(tokens.ids, (std::vector<std::int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(tokens.source, "inline");
}

TEST(TokenText, RejectsANonIntegerNamingLineAndToken) {
  const auto message = parse_error("1 2 3\n4 x5 6\n");
  EXPECT_NE(message.find("tokens.txt line 2"), std::string::npos) << message;
  EXPECT_NE(message.find("'x5' is not a token id"), std::string::npos) << message;
  EXPECT_NE(parse_error("1 2.5\n").find("'2.5' is not a token id"), std::string::npos);
}

TEST(TokenText, RejectsIdsOutsideTheVocabulary) {
  const auto message = parse_error("1 2\n3 4\n5 100\n");
  EXPECT_NE(message.find("line 3"), std::string::npos) << message;
  EXPECT_NE(message.find("token 100 is outside the vocabulary [0, 100)"), std::string::npos) << message;
  EXPECT_NE(parse_error("1 99999999999999999999999\n").find("too large"), std::string::npos);
}

TEST(TokenText, RejectsNegativeIds) {
  const auto message = parse_error("0 -1\n");
  EXPECT_NE(message.find("line 1"), std::string::npos) << message;
  EXPECT_NE(message.find("negative"), std::string::npos) << message;
}

TEST(TokenText, RejectsRaggedSequences) {
  const auto message = parse_error("1 2 3\n\n4 5\n");
  EXPECT_NE(message.find("line 3: 2 tokens, but line 1 has 3"), std::string::npos) << message;
}

TEST(TokenText, RejectsAnEmptyFile) {
  EXPECT_NE(parse_error("").find("no token ids"), std::string::npos);
  EXPECT_NE(parse_error(" \n\n \t\n").find("no token ids"), std::string::npos);
}

TEST(TokenFile, ReadsAFileAndNamesItInErrors) {
  twell::test::TempDir dir;
  const auto good = dir.path() / "good.txt";
  twell::test::write_file(good, "7 8\n9 0\n");
  const auto tokens = twell::read_token_file(good, 10);
  EXPECT_EQ(tokens.ids, (std::vector<std::int32_t>{7, 8, 9, 0}));
  EXPECT_EQ(tokens.source, good.string());

  const auto bad = dir.path() / "bad.txt";
  twell::test::write_file(bad, "7 8\n9 10\n");
  try {
    twell::read_token_file(bad, 10);
    ADD_FAILURE() << "no error";
  } catch (const twell::Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad.string() + " line 2"), std::string::npos) << e.what();
  }
  try {
    twell::read_token_file(dir.path() / "missing.txt", 10);
    ADD_FAILURE() << "no error";
  } catch (const twell::Error& e) {
    EXPECT_EQ(e.kind(), twell::Error::Kind::Io);
  }
}

}  // namespace
