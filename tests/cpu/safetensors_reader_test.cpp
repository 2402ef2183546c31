// SPDX-License-Identifier: GPL-3.0-or-later
// Malformed safetensors files (the test vectors of MODELS.md §3.3, plus a few more): each must fail
// with twell::Error naming the problem, never crash or read out of bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "test_support.hpp"
#include "twell/error.hpp"
#include "twell/numeric.hpp"
#include "twell/safetensors.hpp"

namespace twell {
namespace {

using test::TempDir;

std::string u64_le(std::uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<std::size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xff);
  return bytes;
}

class SafetensorsReaderTest : public ::testing::Test {
 protected:
  // A file with the given header text and data bytes; the length prefix is the header's size.
  std::filesystem::path file(const std::string& header, const std::string& data) {
    return raw(u64_le(header.size()) + header + data);
  }
  std::filesystem::path raw(const std::string& bytes) {
    const auto path = m_dir.path() / ("case" + std::to_string(m_count++) + ".safetensors");
    test::write_file(path, bytes);
    return path;
  }
  // Opens `path`, expecting an error of `kind` whose message contains `fragment` and the file name.
  void expect_error(const std::filesystem::path& path, Error::Kind kind, const std::string& fragment) {
    try {
      SafetensorsFile::open(path);
      FAIL() << "expected an error containing \"" << fragment << "\" for " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path.filename().string()), std::string::npos) << e.what();
    }
  }
  void expect_invalid(const std::string& header, const std::string& data, const std::string& fragment) {
    expect_error(file(header, data), Error::Kind::InvalidInput, fragment);
  }

  TempDir m_dir{"twell-safetensors-reader"};
  int m_count = 0;
};

const std::string kEightBytes(8, '\x01');

TEST_F(SafetensorsReaderTest, FileShorterThanLengthPrefix) {
  expect_error(raw("abc"), Error::Kind::InvalidInput, "too short");
  expect_error(raw(""), Error::Kind::InvalidInput, "too short");
}

TEST_F(SafetensorsReaderTest, HeaderLengthAllOnes) {
  expect_error(raw(u64_le(std::numeric_limits<std::uint64_t>::max()) + "{}"), Error::Kind::InvalidInput,
               "exceeds the 100 MB limit");
}

TEST_F(SafetensorsReaderTest, HeaderLengthBeyondFile) {
  expect_error(raw(u64_le(1000) + "{\"a\":1}"), Error::Kind::InvalidInput, "runs past the end");
}

TEST_F(SafetensorsReaderTest, HeaderLengthZero) {
  expect_error(raw(u64_le(0) + "{}"), Error::Kind::InvalidInput, "too small");
}

TEST_F(SafetensorsReaderTest, HeaderIsArray) {
  expect_invalid("[]", "", "not a JSON object");
}

TEST_F(SafetensorsReaderTest, HeaderIsNotJson) {
  expect_invalid("{this is not json}", "", "not valid JSON");
  expect_invalid("{\"t\": {\"dtype\": \"F32\"", "", "not valid JSON");
}

TEST_F(SafetensorsReaderTest, HeaderInvalidUtf8) {
  expect_invalid("{\"t\xff\xfe\": {\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", "abcd",
                 "not valid JSON");
}

TEST_F(SafetensorsReaderTest, HeaderWithNulByte) {
  expect_invalid(std::string("{\"a\":{}}\0 ", 10), "", "NUL byte");
}

TEST_F(SafetensorsReaderTest, DuplicateTensorName) {
  expect_invalid(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                 R"("t":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                 "ab", "key 't' twice (a duplicate tensor name)");
}

TEST_F(SafetensorsReaderTest, DuplicateFieldInEntry) {
  expect_invalid(R"({"t":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "a",
                 "twice in one object");
}

TEST_F(SafetensorsReaderTest, NestingTooDeep) {
  expect_invalid(R"({"t":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})", "a", "nested deeper than 3");
  expect_invalid(std::string(5000, '[') + std::string(5000, ']'), "", "not a JSON object");
  expect_invalid("{\"t\":" + std::string(5000, '[') + std::string(5000, ']') + "}", "", "nested deeper");
}

TEST_F(SafetensorsReaderTest, UnknownDtype) {
  expect_invalid(R"({"t":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", "abcd", "unknown dtype 'F33'");
}

TEST_F(SafetensorsReaderTest, NegativeDimension) {
  expect_invalid(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd",
                 "has -1, not a non-negative integer");
}

TEST_F(SafetensorsReaderTest, FractionalDimension) {
  expect_invalid(R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "abcd",
                 "has 1.5, not a non-negative integer");
}

TEST_F(SafetensorsReaderTest, ShapeProductOverflows) {
  expect_invalid(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", "abcd",
                 "overflows");
}

TEST_F(SafetensorsReaderTest, DataOffsetsOfLengthThree) {
  expect_invalid(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", "abcd",
                 "'data_offsets' must be two non-negative integers");
}

TEST_F(SafetensorsReaderTest, NegativeDataOffset) {
  expect_invalid(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", "abcd",
                 "'data_offsets' must be two non-negative integers");
}

TEST_F(SafetensorsReaderTest, BeginAfterEnd) {
  expect_invalid(R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", "abcd",
                 "begin 4 is after end 0");
}

TEST_F(SafetensorsReaderTest, ShapeDisagreesWithByteCount) {
  expect_invalid(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd",
                 "data_offsets span 4 bytes but shape [2] of F32 needs 8");
}

TEST_F(SafetensorsReaderTest, EndBeyondDataBuffer) {
  expect_invalid(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcd",
                 "end 8 is beyond the data buffer (4 bytes");
}

TEST_F(SafetensorsReaderTest, OverlappingTensors) {
  expect_invalid(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 kEightBytes, "tensors 'a' and 'b' overlap");
}

TEST_F(SafetensorsReaderTest, GapBetweenTensors) {
  expect_invalid(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                 R"("b":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})",
                 kEightBytes, "gap of 4 unused bytes before tensor 'b'");
}

TEST_F(SafetensorsReaderTest, DataNotStartingAtZero) {
  expect_invalid(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", kEightBytes,
                 "gap of 4 unused bytes");
}

TEST_F(SafetensorsReaderTest, FileCutByOneByte) {
  expect_invalid(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", kEightBytes.substr(1),
                 "is beyond the data buffer (7 bytes; is the file truncated?)");
}

TEST_F(SafetensorsReaderTest, OneTrailingJunkByte) {
  expect_invalid(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", kEightBytes + "x",
                 "1 trailing bytes after the last tensor");
}

TEST_F(SafetensorsReaderTest, MetadataWithNonStringValue) {
  expect_invalid(R"({"__metadata__":{"format":"pt","step":5}})", "",
                 "__metadata__ value for 'step' must be a string");
  expect_invalid(R"({"__metadata__":["pt"]})", "", "__metadata__ must be an object");
}

TEST_F(SafetensorsReaderTest, EntryMissingFields) {
  expect_invalid(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", "abcd", "tensor 't': missing 'dtype'");
  expect_invalid(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", "abcd", "tensor 't': missing 'shape'");
  expect_invalid(R"({"t":{"dtype":"F32","shape":[1]}})", "abcd", "tensor 't': missing 'data_offsets'");
  expect_invalid(R"({"t":[1,2]})", "", "tensor 't': entry must be an object");
}

TEST_F(SafetensorsReaderTest, MissingFileIsAnIoError) {
  expect_error(m_dir.path() / "absent.safetensors", Error::Kind::Io, "open failed");
}

TEST_F(SafetensorsReaderTest, UnsupportedDtypeIsRecognisedAndRefusedByName) {
  const auto path = file(R"({"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", kEightBytes);
  const auto st = SafetensorsFile::open(path);
  ASSERT_NE(st.find("ids"), nullptr);
  EXPECT_EQ(st.find("ids")->dtype_name, "I64");
  EXPECT_FALSE(st.find("ids")->dtype.has_value());
  EXPECT_EQ(st.bytes(*st.find("ids")).size(), 8u);
  try {
    st.view("ids");
    FAIL() << "I64 must not load";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("tensor 'ids' has dtype I64"), std::string::npos) << e.what();
  }
  try {
    st.view("nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor named 'nope'"), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsReaderTest, SubByteDtypeSizes) {
  // F4 packs two elements per byte; three F4 values are not a whole number of bytes.
  EXPECT_NO_THROW(
      SafetensorsFile::open(file(R"({"q":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}})", "ab")));
  expect_invalid(R"({"q":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", "ab",
                 "not a whole number of bytes");
}

TEST_F(SafetensorsReaderTest, MisalignedBf16LoadsThroughCopy) {
  // One U8 tensor first pushes the BF16 tensor to an odd file offset.
  const std::uint16_t a = float_to_bf16_bits(1.5f), b = float_to_bf16_bits(-0.015625f);
  std::string data = "z";
  data.append(reinterpret_cast<const char*>(&a), 2).append(reinterpret_cast<const char*>(&b), 2);
  std::string header = R"({"pad":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                       R"("w":{"dtype":"BF16","shape":[2],"data_offsets":[1,5]}})";
  if (header.size() % 2 != 0) header += ' ';  // 8 + even header + 1 byte of "pad" = an odd offset
  const auto st = SafetensorsFile::open(file(header, data));
  const auto view = st.view("w");
  EXPECT_NE(reinterpret_cast<std::uintptr_t>(view.bytes.data()) % 2, 0u) << "test needs a misaligned tensor";
  EXPECT_EQ(view.to_float(), (std::vector<float>{1.5f, -0.015625f}));
  EXPECT_EQ(view.to_bf16_bits(), (std::vector<std::uint16_t>{a, b}));
}

TEST_F(SafetensorsReaderTest, ZeroSizeAndScalarTensorsLoad) {
  const float pi = 3.25f;
  const auto st =
      SafetensorsFile::open(file(R"({"empty":{"dtype":"F32","shape":[0,16],"data_offsets":[0,0]},)"
                                 R"("scalar":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                                 R"("__metadata__":{"format":"pt"}})",
                                 std::string(reinterpret_cast<const char*>(&pi), 4)));
  EXPECT_EQ(st.entries().size(), 2u);
  EXPECT_EQ(st.metadata().at("format"), "pt");
  const auto empty = st.view("empty");
  EXPECT_EQ(empty.element_count(), 0);
  EXPECT_TRUE(empty.to_float().empty());
  const auto scalar = st.view("scalar");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.element_count(), 1);
  EXPECT_EQ(scalar.to_float(), std::vector<float>{3.25f});
}

TEST_F(SafetensorsReaderTest, EmptyHeaderObjectIsAValidEmptyFile) {
  const auto st = SafetensorsFile::open(file("{}      ", ""));
  EXPECT_TRUE(st.entries().empty());
  EXPECT_EQ(st.header_size(), 8u);
}

TEST_F(SafetensorsReaderTest, UnknownEntryFieldIsAWarning) {
  const auto st = SafetensorsFile::open(
      file(R"({"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"strides":[1]}})", "a"));
  ASSERT_EQ(st.warnings().size(), 1u);
  EXPECT_NE(st.warnings()[0].find("ignored unknown field 'strides'"), std::string::npos);
}

TEST_F(SafetensorsReaderTest, F16ConvertsExactlyIncludingSubnormals) {
  const std::uint16_t bits[4] = {0x3c00 /*1*/, 0x0001 /*2^-24*/, 0xfc00 /*-inf*/, 0x8000 /*-0*/};
  const auto st = SafetensorsFile::open(file(R"({"h":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})",
                                             std::string(reinterpret_cast<const char*>(bits), 8)));
  const auto values = st.view("h").to_float();
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], std::ldexp(1.0f, -24));
  EXPECT_EQ(values[2], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(values[3]) && values[3] == 0.0f);
}

}  // namespace
}  // namespace twell
