// braid::cli (cli.h) over CLI11: the one file that includes <CLI/CLI.hpp>, so CLI11's
// code is generated once for every program (the braid_cli library).
#include "src/tools/cli.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <type_traits>

#include <CLI/CLI.hpp>

namespace braid::cli {

static_assert(kAnyNumber == CLI::detail::expected_max_vector_size,
              "kAnyNumber is CLI11's 'as many as given'");

bool parseSize(const std::string& text, size_t* out) {
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

// ---- validators -------------------------------------------------------------------------

Validator::Validator(std::function<std::string(std::string& text)> check, const std::string& name)
    : v_(std::make_shared<const CLI::Validator>(std::move(check), "", name)) {}
Validator::Validator(std::shared_ptr<const CLI::Validator> v) : v_(std::move(v)) {}
const CLI::Validator& Validator::get() const { return *v_; }

Validator sizeValue() {
  return Validator(
      [](std::string& text) -> std::string {
        size_t bytes = 0;
        if (!parseSize(text, &bytes))
          return "'" + text + "' is not a size (bytes, or with a K, M or G suffix)";
        text = std::to_string(bytes);
        return std::string();
      },
      "size");
}

namespace {

template <class T>
Validator rangeOf(T lo, T hi) {
  auto v = std::make_shared<CLI::Validator>(CLI::Range(lo, hi));
  v->description("");
  return Validator(std::shared_ptr<const CLI::Validator>(std::move(v)));
}

template <class T>
Validator atLeastOf(T lo) {
  return Validator(
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
      "at least");
}

}  // namespace

Validator range(int lo, int hi) { return rangeOf(lo, hi); }
Validator range(double lo, double hi) { return rangeOf(lo, hi); }
Validator range(size_t lo, size_t hi) { return rangeOf(lo, hi); }

Validator atLeast(int64_t lo) { return atLeastOf(lo); }
Validator atLeast(double lo) { return atLeastOf(lo); }

Validator nonEmpty() {
  return Validator(
      [](std::string& text) { return text.empty() ? std::string("needs a value") : std::string(); },
      "non-empty");
}

Validator isMember(const std::vector<std::string>& words) {
  return Validator(std::make_shared<const CLI::IsMember>(words));
}

// ---- options ------------------------------------------------------------------------------

Option* Option::check(const Validator& v) {
  o_->check(v.get());
  return this;
}
Option* Option::transform(const Validator& v) {
  o_->transform(v.get());
  return this;
}
Option* Option::type_name(const std::string& name) {
  o_->type_name(name);
  return this;
}
Option* Option::group(const std::string& name) {
  o_->group(name);
  return this;
}
Option* Option::required() {
  o_->required();
  return this;
}
Option* Option::expected(int min, int max) {
  o_->expected(min, max);
  return this;
}
Option* Option::multi_option_policy(MultiOptionPolicy policy) {
  o_->multi_option_policy(policy == MultiOptionPolicy::TakeAll ? CLI::MultiOptionPolicy::TakeAll
                                                               : CLI::MultiOptionPolicy::TakeLast);
  return this;
}
size_t Option::count() const { return o_->count(); }
std::string Option::get_name() const { return o_->get_name(); }

// ---- the app ------------------------------------------------------------------------------

App::App(const std::string& description, const std::string& program)
    : app_(std::make_unique<CLI::App>(description, program)) {
  app_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app_->get_formatter()->label("Usage", "usage");
  app_->get_formatter()->column_width(28);
  app_->failure_message([](const CLI::App* app, const CLI::Error& e) {
    return app->get_name() + ": " + e.what() + " (" + app->get_name() + " --help: usage)\n";
  });
}

App::~App() = default;

void App::footer(const std::string& text) { app_->footer(text); }
void App::prefix_command() { app_->prefix_command(); }
std::vector<std::string> App::remaining() const { return app_->remaining(); }

Option* App::keep(CLI::Option* o) { return &options_.emplace_back(o); }

Option* App::add_option(const std::string& names, int& value, const std::string& help) {
  return keep(app_->add_option(names, value, help));
}
Option* App::add_option(const std::string& names, int64_t& value, const std::string& help) {
  return keep(app_->add_option(names, value, help));
}
Option* App::add_option(const std::string& names, size_t& value, const std::string& help) {
  return keep(app_->add_option(names, value, help));
}
Option* App::add_option(const std::string& names, double& value, const std::string& help) {
  return keep(app_->add_option(names, value, help));
}
Option* App::add_option(const std::string& names, std::string& value, const std::string& help) {
  return keep(app_->add_option(names, value, help));
}
Option* App::add_option(const std::string& names, std::vector<int>& values,
                        const std::string& help) {
  return keep(app_->add_option(names, values, help));
}
Option* App::add_option(const std::string& names, std::vector<size_t>& values,
                        const std::string& help) {
  return keep(app_->add_option(names, values, help));
}
Option* App::add_option(const std::string& names, std::vector<std::string>& values,
                        const std::string& help) {
  return keep(app_->add_option(names, values, help));
}
Option* App::add_flag(const std::string& names, bool& value, const std::string& help) {
  return keep(app_->add_flag(names, value, help));
}

template <class T>
Option* App::add_option_function(const std::string& names,
                                 const std::function<void(const T&)>& take,
                                 const std::string& help) {
  return keep(app_->add_option_function<T>(names, take, help));
}
template Option* App::add_option_function<int>(const std::string&,
                                               const std::function<void(const int&)>&,
                                               const std::string&);
template Option* App::add_option_function<std::string>(
    const std::string&, const std::function<void(const std::string&)>&, const std::string&);

Option* App::addSize(const std::string& names, size_t* out, const std::string& help) {
  return add_option(names, *out, help)->transform(sizeValue())->type_name("SIZE");
}

int App::fail(const std::string& option, const std::string& why) const {
  return app_->exit(CLI::ValidationError(option, why)) == 0 ? 0 : 2;
}

bool App::parseCommandLine(int argc, const char* const* argv, int* exitCode) {
  try {
    app_->parse(argc, argv);
    return true;
  } catch (const CLI::ParseError& e) {
    // CLI11 checks the required options and the values before it reports the words it
    // does not know; a mistyped option is the likelier cause, so it is named first.
    const std::vector<std::string> unknown = app_->remaining();
    if (e.get_exit_code() != 0 && !unknown.empty() && !app_->get_prefix_command())
      *exitCode = fail(unknown.front(),
                       unknown.front()[0] == '-' ? "unknown option" : "unexpected argument");
    else
      *exitCode = app_->exit(e) == 0 ? 0 : 2;
    return false;
  }
}

}  // namespace braid::cli
