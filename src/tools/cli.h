// The command line conventions every Braid program shares, over CLI11 (header-only,
// Debian libcli11-dev): the tools (src/tools), the perf programs (perf/) and braid-train
// declare their options on a braid::cli::App. The last of a repeated option wins (as
// getopt); an unknown option or a bad value is one line on stderr naming the option and
// exit status 2 (an unknown word is named before any other error); --help prints the
// usage to stdout and exits with 0; sizes take K/M/G suffixes (powers of 1024). Never
// included by the library (src/ outside src/tools, algorithms/, transports/).
//
// CLI11 itself is compiled once, in cli.cc (the braid_cli library): a file that includes
// <CLI/CLI.hpp> costs about 14 s of CPU (30 to 90 under the sanitizers), nearly all of it
// generating CLI11's own code again, so this header does not include it. App, Option and
// Validator below are thin handles on CLI11's classes with the same names and calls
// (add_option, add_flag, check, type_name, ...): each call is passed on as it is. An
// option of a value type not listed here is one more overload in both files.
#ifndef BRAID_TOOLS_CLI_H_
#define BRAID_TOOLS_CLI_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI

namespace braid::cli {

/// Parse a size: a number with an optional K, M or G suffix (either case; powers of
/// 1024), "1.5K" = 1536. False on bad text, a negative number or more than 1e18 bytes.
bool parseSize(const std::string& text, size_t* out);

/// A check or a transform of an option's text (a CLI::Validator): `check` returns the
/// error ("" when the text is good) and may rewrite the text; `name` is the validator's
/// name (never shown in the usage).
class Validator {
 public:
  Validator(std::function<std::string(std::string& text)> check, const std::string& name);
  explicit Validator(std::shared_ptr<const CLI::Validator> v);
  const CLI::Validator& get() const;

 private:
  std::shared_ptr<const CLI::Validator> v_;
};

/// The transform of a size option: the text becomes its number of bytes, or the error
/// says what a size is.
Validator sizeValue();

/// The check of a number from lo to hi (CLI::Range). Its text stays out of the usage
/// (CLI11 would write "INT:INT in [1 - 1024]" there); the option's help says the range
/// where it matters. For int, double and size_t.
Validator range(int lo, int hi);
Validator range(double lo, double hi);
Validator range(size_t lo, size_t hi);

/// The check of a number of at least lo, with no upper bound. For int64_t and double.
Validator atLeast(int64_t lo);
Validator atLeast(double lo);

/// The check of an option that needs a value (a file name, a directory).
Validator nonEmpty();

/// The check of a word that must be one of `words` (CLI::IsMember: the usage lists them).
Validator isMember(const std::vector<std::string>& words);

/// A reader of an option's text into a T: false when the text is not one.
template <class T>
using Reader = std::function<bool(const std::string& text, T* out)>;

/// The check of an option whose text `read` must accept; `expected` says what it may be.
template <class T>
Validator readableBy(Reader<T> read, const std::string& expected) {
  return Validator(
      [read, expected](std::string& text) {
        T value{};
        return read(text, &value) ? std::string() : expected + ", not '" + text + "'";
      },
      expected);
}

/// How the values of an option given more than once are kept (CLI::MultiOptionPolicy):
/// the last one (every App's default) or all of them (a list option).
enum class MultiOptionPolicy { TakeLast, TakeAll };

/// As many values as the command line gives (CLI::detail::expected_max_vector_size), for
/// Option::expected.
constexpr int kAnyNumber = 1 << 29;

/// One option of an App (a CLI::Option); its calls return it, to be chained.
class Option {
 public:
  explicit Option(CLI::Option* o) : o_(o) {}
  Option* check(const Validator& v);
  Option* transform(const Validator& v);
  Option* type_name(const std::string& name);
  Option* group(const std::string& name);
  Option* required();
  Option* expected(int min, int max);
  Option* multi_option_policy(MultiOptionPolicy policy);
  /// How many times the command line gave it.
  size_t count() const;
  /// Its name as errors write it ("--brief").
  std::string get_name() const;

 private:
  CLI::Option* o_;
};

/// A CLI11 application with Braid's conventions, set before any option is added.
class App {
 public:
  App(const std::string& description, const std::string& program);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  /// Text printed after the options in the usage.
  void footer(const std::string& text);
  /// The first word that is not one of the app's options ends them: it and every word
  /// after it are left to remaining().
  void prefix_command();
  /// The words that were not the app's (after prefix_command: the program and its
  /// arguments).
  std::vector<std::string> remaining() const;

  /// An option storing its value into `value`, which holds its default.
  Option* add_option(const std::string& names, int& value, const std::string& help);
  Option* add_option(const std::string& names, int64_t& value, const std::string& help);
  Option* add_option(const std::string& names, size_t& value, const std::string& help);
  Option* add_option(const std::string& names, double& value, const std::string& help);
  Option* add_option(const std::string& names, std::string& value, const std::string& help);
  Option* add_option(const std::string& names, std::vector<int>& values,
                     const std::string& help);
  Option* add_option(const std::string& names, std::vector<size_t>& values,
                     const std::string& help);
  Option* add_option(const std::string& names, std::vector<std::string>& values,
                     const std::string& help);
  /// A flag: `value` becomes true when given.
  Option* add_flag(const std::string& names, bool& value, const std::string& help);
  /// An option whose value (a T: int or std::string) is handed to `take`.
  template <class T>
  Option* add_option_function(const std::string& names, const std::function<void(const T&)>& take,
                              const std::string& help);

  /// A size option (-b 8, -e 1G, ...): `out` holds its default.
  Option* addSize(const std::string& names, size_t* out, const std::string& help);

  /// An option whose text `read` turns into *out (which holds the default); a text it
  /// refuses is an error that names the option and says what is `expected`.
  template <class T>
  Option* addRead(const std::string& names, T* out, Reader<T> read, const std::string& expected,
                  const std::string& help) {
    return add_option_function<std::string>(
               names, [out, read](const std::string& text) { read(text, out); }, help)
        ->check(readableBy(read, expected));
  }

  /// Ends a check made after parsing as a parse error ends: its line on stderr naming
  /// `option`; returns the exit status (2).
  int fail(const std::string& option, const std::string& why) const;

  /// Parses argv. True: go on. False: the program ends with *exitCode, 0 after --help
  /// (the usage is printed) and 2 after an error (its line is printed).
  bool parseCommandLine(int argc, const char* const* argv, int* exitCode);

 private:
  Option* keep(CLI::Option* o);

  std::unique_ptr<CLI::App> app_;
  std::deque<Option> options_;  // stable addresses: the Option* handed out
};

}  // namespace braid::cli

#endif  // BRAID_TOOLS_CLI_H_
