// Test helpers for command-line parsers (tests/perf/options_test.cc,
// tests/compare/options_test.cc): a parser run on words, the sweep's values, and the
// check that a rejected command line ends as src/tools/cli.h promises (exit code 2, one line on stderr that
// starts with the program's name and names the option).
#ifndef BRAID_TESTS_PERF_COMMAND_LINE_H_
#define BRAID_TESTS_PERF_COMMAND_LINE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "perf/options.h"

namespace braid_test {

/// Expects the sweep's six values.
inline void expectSweep(const braid_perf::Sweep& s, size_t minBytes, size_t maxBytes,
                        size_t stepBytes, double stepFactor, int iters, int warmup) {
  EXPECT_EQ(minBytes, s.minBytes);
  EXPECT_EQ(maxBytes, s.maxBytes);
  EXPECT_EQ(stepBytes, s.stepBytes);
  EXPECT_EQ(stepFactor, s.stepFactor);
  EXPECT_EQ(iters, s.iters);
  EXPECT_EQ(warmup, s.warmup);
}

/// A parser of argc/argv (argv[0]: the program's name) into *opt: false with *rc when
/// the program should end.
template <class Opt>
using Parser = bool (*)(int argc, char** argv, const char* program, Opt* opt, int* rc);

/// Runs `parse` on `program` followed by `args`.
template <class Opt>
bool parseWords(Parser<Opt> parse, const std::string& program, std::vector<std::string> args,
                Opt* opt, int* rc) {
  args.insert(args.begin(), program);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parse(static_cast<int>(args.size()), argv.data(), program.c_str(), opt, rc);
}

/// Expects `args` to be rejected with exit code 2 and one line "PROGRAM: ... NAMED: ...".
template <class Opt>
void expectRejected(Parser<Opt> parse, const std::string& program,
                    const std::vector<std::string>& args, const std::string& named) {
  Opt opt;
  int rc = -1;
  testing::internal::CaptureStderr();
  EXPECT_FALSE(parseWords(parse, program, args, &opt, &rc)) << testing::PrintToString(args);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(2, rc) << testing::PrintToString(args);
  EXPECT_EQ(0u, err.rfind(program + ": ", 0)) << err;
  EXPECT_NE(std::string::npos, err.find(" " + named + ": ")) << named << " in: " << err;
  EXPECT_EQ(1, std::count(err.begin(), err.end(), '\n')) << err;
}

/// Expects -h to end with exit code 0 and the usage on stdout; returns the usage.
template <class Opt>
std::string expectHelp(Parser<Opt> parse, const std::string& program, const std::string& flag) {
  Opt opt;
  int rc = -1;
  testing::internal::CaptureStdout();
  EXPECT_FALSE(parseWords(parse, program, {flag}, &opt, &rc));
  const std::string help = testing::internal::GetCapturedStdout();
  EXPECT_EQ(0, rc);
  EXPECT_NE(std::string::npos, help.find("usage: " + program)) << help;
  return help;
}

}  // namespace braid_test

#endif  // BRAID_TESTS_PERF_COMMAND_LINE_H_
