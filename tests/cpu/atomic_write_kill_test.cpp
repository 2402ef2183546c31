// SPDX-License-Identifier: GPL-3.0-or-later
// Data safety: a writer killed at an arbitrary moment never leaves a truncated file where a good one
// stood. A child process rewrites a file atomically in a loop; the parent SIGKILLs it at varying
// moments and then checks that the file is one of the complete versions, byte for byte.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "test_support.hpp"
#include "twell/atomic_file.hpp"

namespace {

std::string version_payload(int version) {
  // Several MB, so a kill usually lands inside a write; the version is in every line.
  std::string payload;
  const std::string line = "version " + std::to_string(version) + " of the report, line padding padding padding\n";
  while (payload.size() < 4u << 20) payload += line;
  return payload;
}

}  // namespace

TEST(AtomicWrite, KilledWriterLeavesOldOrNewFileNeverATruncatedOne) {
  twell::test::TempDir dir;
  const auto path = dir.path() / "report.json";
  const std::string original = version_payload(0);
  twell::write_file_atomically(path, original);

  for (int round = 0; round < 12; ++round) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int version = 1;; ++version) twell::write_file_atomically(path, version_payload(version));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3 + 7 * round));
    ASSERT_EQ(kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status));

    const std::string content = twell::test::read_file(path);
    const auto first_newline = content.find('\n');
    ASSERT_NE(first_newline, std::string::npos) << "round " << round << ": empty or truncated file";
    const std::string first_line = content.substr(0, first_newline + 1);
    const int version = std::stoi(first_line.substr(8));
    EXPECT_EQ(content, version_payload(version)) << "round " << round << ": file is not a complete version";
  }
}
