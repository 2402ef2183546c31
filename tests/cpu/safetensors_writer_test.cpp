// SPDX-License-Identifier: GPL-3.0-or-later
#include <gtest/gtest.h>

#include <cstring>

#include "test_support.hpp"
#include "twell/error.hpp"
#include "twell/numeric.hpp"
#include "twell/safetensors.hpp"

namespace twell {
namespace {

using test::TempDir;

template <typename T>
std::span<const std::byte> as_bytes(const std::vector<T>& values) {
  return std::as_bytes(std::span<const T>(values));
}

std::uint64_t header_length(const std::string& file) {
  std::uint64_t length = 0;
  std::memcpy(&length, file.data(), 8);
  return length;
}

std::size_t entries_in(const std::filesystem::path& directory) {
  return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(directory), {}));
}

TEST(SafetensorsWriter, RoundTripsEveryLoadableDtype) {
  TempDir dir;
  const std::vector<float> f32{1.0f, -2.5f, 3.0e-3f, 65504.0f, -0.0f, 7.0f};
  std::vector<std::uint16_t> bf16, f16;
  for (const float value : f32) {
    bf16.push_back(float_to_bf16_bits(value));
    f16.push_back(float_to_f16_bits(value));
  }
  const auto path = dir.path() / "model.safetensors";
  write_safetensors(path,
                    {{{"b", "BF16", {2, 3}}, as_bytes(bf16)},
                     {{"a", "F32", {3, 2}}, as_bytes(f32)},
                     {{"h", "F16", {6}}, as_bytes(f16)},
                     {{"ids", "I64", {0}}, {}}},
                    {{"format", "pt"}, {"generator", "test"}});

  const auto raw = test::read_file(path);
  EXPECT_EQ(header_length(raw) % 8, 0u) << "Hugging Face pads the header to 8 bytes";
  const auto st = SafetensorsFile::open(path);
  EXPECT_EQ(st.metadata().at("generator"), "test");
  ASSERT_EQ(st.entries().size(), 4u);
  // Largest item size first, then by name: every tensor stays aligned to its own item size.
  EXPECT_EQ(st.entries()[0].name, "ids");
  EXPECT_EQ(st.entries()[1].name, "a");
  for (const auto& entry : st.entries()) {
    const auto item = entry.dtype ? item_size(*entry.dtype) : 8;
    EXPECT_EQ((8 + st.header_size() + entry.begin) % item, 0u) << entry.name;
  }
  EXPECT_EQ(st.view("a").to_float(), f32);
  EXPECT_EQ(st.view("a").shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(st.view("b").to_bf16_bits(), bf16);
  EXPECT_EQ(st.view("h").to_float()[3], 65504.0f);
  const auto b = st.view("b").to_float();
  for (std::size_t i = 0; i < f32.size(); ++i) EXPECT_EQ(b[i], round_to_bf16(f32[i]));
  EXPECT_EQ(st.view("a").to_bf16_bits(), bf16) << "F32 -> bf16 rounds to nearest even";
  EXPECT_EQ(entries_in(dir.path()), 1u) << "no temporary file left behind";
}

TEST(SafetensorsWriter, StreamsChunksInSpecOrder) {
  TempDir dir;
  const auto path = dir.path() / "stream.safetensors";
  std::vector<float> big(1000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  const std::vector<std::uint16_t> small{1, 2, 3};
  {
    SafetensorsWriter writer(path, {{"first", "BF16", {3}}, {"empty", "F32", {0}}, {"big", "F32", {10, 100}}},
                             {{"format", "pt"}});
    EXPECT_EQ(writer.current_tensor(), 0u);
    writer.append(as_bytes(small));
    EXPECT_EQ(writer.current_tensor(), 2u) << "a zero-size tensor needs no bytes";
    const auto bytes = as_bytes(big);
    for (std::size_t offset = 0; offset < bytes.size(); offset += 400)
      writer.append(bytes.subspan(offset, 400));
    EXPECT_EQ(writer.current_tensor(), 3u);
    EXPECT_FALSE(std::filesystem::exists(path)) << "the file appears only when finished";
    writer.finish();
  }
  const auto st = SafetensorsFile::open(path);
  EXPECT_EQ(st.entries()[0].name, "first") << "the streaming writer keeps the caller's order";
  EXPECT_EQ(st.view("big").to_float(), big);
  EXPECT_EQ(st.view("first").to_bf16_bits(), small);
  EXPECT_EQ(st.view("empty").element_count(), 0);
}

TEST(SafetensorsWriter, UnfinishedWriterLeavesNothingBehind) {
  TempDir dir;
  const auto path = dir.path() / "partial.safetensors";
  {
    SafetensorsWriter writer(path, {{"t", "F32", {4}}});
    const std::vector<float> two{1.0f, 2.0f};
    writer.append(as_bytes(two));
    EXPECT_EQ(writer.remaining_in_current_tensor(), 8u);
    try {
      writer.finish();
      FAIL() << "finish() with a short tensor must throw";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tensor 't' is missing 8 bytes"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(entries_in(dir.path()), 0u);
}

TEST(SafetensorsWriter, RejectsBadSpecsAndOverlongChunks) {
  TempDir dir;
  const auto path = dir.path() / "bad.safetensors";
  EXPECT_THROW(SafetensorsWriter(path, {{"t", "F33", {1}}}), Error);
  EXPECT_THROW(SafetensorsWriter(path, {{"t", "F32", {1}}, {"t", "F32", {1}}}), Error);
  EXPECT_THROW(SafetensorsWriter(path, {{"", "F32", {1}}}), Error);
  EXPECT_THROW(SafetensorsWriter(path, {{"t", "F32", {-1}}}), Error);
  EXPECT_THROW(SafetensorsWriter(path, {{"t", "F32", {1ll << 40, 1ll << 40}}}), Error);
  SafetensorsWriter writer(path, {{"t", "F32", {1}}});
  const std::vector<float> two{1.0f, 2.0f};
  try {
    writer.append(as_bytes(two));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("which has only 4 bytes left"), std::string::npos) << e.what();
  }
  const std::vector<float> wrong_size{1.0f};
  EXPECT_THROW(write_safetensors(path, {{{"t", "F32", {2}}, as_bytes(wrong_size)}}), Error);
}

TEST(SafetensorsWriter, ReplacesAnExistingFileAtomically) {
  TempDir dir;
  const auto path = dir.path() / "model.safetensors";
  test::write_file(path, "old contents");
  const std::vector<float> one{4.0f};
  write_safetensors(path, {{{"x", "F32", {1}}, as_bytes(one)}});
  EXPECT_EQ(SafetensorsFile::open(path).view("x").to_float(), one);
}

TEST(SafetensorsWriter, MissingDirectoryIsAnIoError) {
  TempDir dir;
  try {
    SafetensorsWriter writer(dir.path() / "no" / "such" / "x.safetensors", {{"t", "F32", {1}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::Io);
  }
}

}  // namespace
}  // namespace twell
