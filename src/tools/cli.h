// The command line conventions every Braid program shares, over CLI11 (header-only,
// Debian libcli11-dev): the tools (src/tools), the perf programs (perf/) and braid-train
// declare their options on a braid::cli::App. The last of a repeated option wins (as
// getopt); an unknown option or a bad value is one line on stderr naming the option and
// exit status 2 (an unknown word is named before any other error); --help prints the
// usage to stdout and exits with 0; sizes take K/M/G suffixes (powers of 1024). Never
// included by the library (src/ outside src/tools, algorithms/, transports/).
#ifndef BRAID_TOOLS_CLI_H_
#define BRAID_TOOLS_CLI_H_

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

namespace braid::cli {

/// Parse a size: a number with an optional K, M or G suffix (either case; powers of
/// 1024), "1.5K" = 1536. False on bad text, a negative number or more than 1e18 bytes.
inline bool parseSize(const std::string& text, size_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || v < 0) return false;
  double mult = 1;
  const std::string suffix(end);
  if (suffix == "K" || suffix == "k")
    mult = 1024.0;
  else if (suffix == "M" || suffix == "m")
    mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    return false;
  const double bytes = v * mult;
  if (bytes > 1e18) return false;
  *out = static_cast<size_t>(bytes);
  return true;
}

/// The transform of a size option: the text becomes its number of bytes, or the error
/// says what a size is.
inline CLI::Validator sizeValue() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        size_t bytes = 0;
        if (!parseSize(text, &bytes))
          return "'" + text + "' is not a size (bytes, or with a K, M or G suffix)";
        text = std::to_string(bytes);
        return std::string();
      },
      "", "size");
}

/// The check of a number from lo to hi. Its text stays out of the usage (CLI11 would
/// write "INT:INT in [1 - 1024]" there); the option's help says the range where it matters.
template <class T>
CLI::Validator range(T lo, T hi) {
  CLI::Validator v = CLI::Range(lo, hi);
  v.description("");
  return v;
}

/// The check of a number of at least lo, with no upper bound.
template <class T>
CLI::Validator atLeast(T lo) {
  return CLI::Validator(
      [lo](std::string& text) {
        T v{};
        std::ostringstream why;
        if (!CLI::detail::lexical_cast(text, v))
          why << "'" << text << "' is not "
              << (std::is_integral<T>::value ? "a whole number" : "a number");
        else if (v < lo)
          why << text << " is below " << lo;
        return why.str();
      },
      "", "at least");
}

/// The check of an option that needs a value (a file name, a directory).
inline CLI::Validator nonEmpty() {
  return CLI::Validator(
      [](std::string& text) { return text.empty() ? std::string("needs a value") : std::string(); },
      "", "non-empty");
}

/// A reader of an option's text into a T: false when the text is not one.
template <class T>
using Reader = std::function<bool(const std::string& text, T* out)>;

/// The check of an option whose text `read` must accept; `expected` says what it may be.
template <class T>
CLI::Validator readableBy(Reader<T> read, const std::string& expected) {
  return CLI::Validator(
      [read, expected](std::string& text) {
        T value{};
        return read(text, &value) ? std::string() : expected + ", not '" + text + "'";
      },
      "", expected);
}

/// A CLI11 application with Braid's conventions, set before any option is added.
class App : public CLI::App {
 public:
  App(const std::string& description, const std::string& program) : CLI::App(description, program) {
    option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    get_formatter()->label("Usage", "usage");
    get_formatter()->column_width(28);
    failure_message([](const CLI::App* app, const CLI::Error& e) {
      return app->get_name() + ": " + e.what() + " (" + app->get_name() + " --help: usage)\n";
    });
  }

  /// A size option (-b 8, -e 1G, ...): `out` holds its default.
  CLI::Option* addSize(const std::string& names, size_t* out, const std::string& help) {
    return add_option(names, *out, help)->transform(sizeValue())->type_name("SIZE");
  }

  /// An option whose text `read` turns into *out (which holds the default); a text it
  /// refuses is an error that names the option and says what is `expected`.
  template <class T>
  CLI::Option* addRead(const std::string& names, T* out, Reader<T> read,
                       const std::string& expected, const std::string& help) {
    return add_option_function<std::string>(
               names, [out, read](const std::string& text) { read(text, out); }, help)
        ->check(readableBy(read, expected));
  }

  /// Ends a check made after parsing as a parse error ends: its line on stderr naming
  /// `option`; returns the exit status (2).
  int fail(const std::string& option, const std::string& why) const {
    return exit(CLI::ValidationError(option, why)) == 0 ? 0 : 2;
  }

  /// Parses argv. True: go on. False: the program ends with *exitCode, 0 after --help
  /// (the usage is printed) and 2 after an error (its line is printed).
  bool parseCommandLine(int argc, const char* const* argv, int* exitCode) {
    try {
      parse(argc, argv);
      return true;
    } catch (const CLI::ParseError& e) {
      // CLI11 checks the required options and the values before it reports the words it
      // does not know; a mistyped option is the likelier cause, so it is named first.
      const std::vector<std::string> unknown = remaining();
      if (e.get_exit_code() != 0 && !unknown.empty() && !get_prefix_command())
        *exitCode = fail(unknown.front(),
                         unknown.front()[0] == '-' ? "unknown option" : "unexpected argument");
      else
        *exitCode = exit(e) == 0 ? 0 : 2;
      return false;
    }
  }
};

}  // namespace braid::cli

#endif  // BRAID_TOOLS_CLI_H_
