// Command-line parsing for the matmul ladder programs.
//
// Host-only C++17 (no CUDA headers) so the parsing rules can be compiled into a plain host
// program and tested on a machine without a GPU. harness.cuh includes this file; every
// program therefore accepts exactly the same command line:
//
//   prog [N ...] [--reps R] [--warmup W] [--seed S] [--check auto|cpu|cublas|none] [-h|--help]
//
// Options also accept the --name=value form. The environment variables PROFKIT_REPS and
// PROFKIT_WARMUP override both the defaults and the command line: profkit sets them to small
// values when it runs a program under ncu, so only a few launches are replayed whatever
// arguments the program was given. Usage errors exit with code 2, like click and argparse.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace profkit {

constexpr int kUsageExitCode = 2;
constexpr int kFailureExitCode = 1;

// Largest accepted N: N*N stays below 2^31, so kernels can index with 32-bit ints.
constexpr long long kMaxN = 32768;
constexpr long long kMaxRepeats = 10000;

// How the result is verified; see harness.cuh for what each method does.
enum class CheckMode { Auto, Cpu, Cublas, None };

inline const char* check_mode_name(CheckMode mode) {
    switch (mode) {
        case CheckMode::Auto: return "auto";
        case CheckMode::Cpu: return "cpu";
        case CheckMode::Cublas: return "cublas";
        case CheckMode::None: return "none";
    }
    return "unknown";
}

struct Options {
    std::vector<int> sizes{1024, 4096};
    int reps = 20;
    int warmup = 3;
    std::uint64_t seed = 1234;
    CheckMode check = CheckMode::Auto;
};

enum class ParseStatus { Run, Help, Error };

struct ParsedArgs {
    ParseStatus status = ParseStatus::Run;
    Options options;
    std::string error;  // set when status == Error
};

inline std::string usage(const char* prog) {
    std::string text = "usage: ";
    text += prog;
    text +=
        " [N ...] [--reps R] [--warmup W] [--seed S] [--check auto|cpu|cublas|none]\n"
        "  N             square matrix size(s), 1.." + std::to_string(kMaxN) + " (default: 1024 4096)\n"
        "  --reps R      timed runs per size, >= 1 (default 20; env PROFKIT_REPS overrides)\n"
        "  --warmup W    untimed warm-up runs, >= 0 (default 3; env PROFKIT_WARMUP overrides)\n"
        "  --seed S      host RNG seed for the inputs (default 1234)\n"
        "  --check M     auto: float64 CPU reference for N <= 512, else cuBLAS (TF32 off)\n"
        "                plus a float64 check of 256 sampled entries; cpu: float64 CPU\n"
        "                reference at every N; cublas: cuBLAS + sampled check; none: skip\n"
        "stdout: one JSON line per N; stderr: human-readable progress.\n";
    return text;
}

// Parses a whole unsigned decimal integer in [lo, hi]; rejects signs, blanks and trailing text.
inline std::optional<long long> parse_integer(const char* text, long long lo, long long hi) {
    if (text == nullptr || *text == '\0') return std::nullopt;
    for (const char* p = text; *p; ++p) {
        if (*p < '0' || *p > '9') return std::nullopt;
    }
    errno = 0;
    const long long value = std::strtoll(text, nullptr, 10);
    if (errno != 0 || value < lo || value > hi) return std::nullopt;
    return value;
}

inline std::optional<std::uint64_t> parse_seed(const char* text) {
    if (text == nullptr || *text == '\0') return std::nullopt;
    for (const char* p = text; *p; ++p) {
        if (*p < '0' || *p > '9') return std::nullopt;
    }
    errno = 0;
    const unsigned long long value = std::strtoull(text, nullptr, 10);
    if (errno != 0) return std::nullopt;
    return static_cast<std::uint64_t>(value);
}

inline std::optional<CheckMode> parse_check_mode(const std::string& text) {
    if (text == "auto") return CheckMode::Auto;
    if (text == "cpu") return CheckMode::Cpu;
    if (text == "cublas") return CheckMode::Cublas;
    if (text == "none") return CheckMode::None;
    return std::nullopt;
}

// Parses argv (argv[0] is the program) and the two environment overrides (nullptr = unset).
// Pure: prints nothing and never exits, so a host-only test can call it directly.
inline ParsedArgs parse_args(int argc, const char* const* argv, const char* env_reps,
                             const char* env_warmup) {
    ParsedArgs out;
    auto fail = [&out](std::string message) {
        out.status = ParseStatus::Error;
        out.error = std::move(message);
        return out;
    };
    std::vector<int> sizes;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "-h" || arg == "--help") {
            out.status = ParseStatus::Help;
            return out;
        }
        if (arg.rfind("--", 0) != 0) {
            const auto n = parse_integer(arg.c_str(), 1, kMaxN);
            if (!n) {
                return fail("matrix size '" + arg + "' is not an integer in 1.." + std::to_string(kMaxN));
            }
            sizes.push_back(static_cast<int>(*n));
            continue;
        }
        std::string name = arg;
        std::string value;
        const auto eq = arg.find('=');
        if (eq != std::string::npos) {
            name = arg.substr(0, eq);
            value = arg.substr(eq + 1);
        } else if (name == "--reps" || name == "--warmup" || name == "--seed" || name == "--check") {
            if (i + 1 >= argc) return fail("option " + name + " needs a value");
            value = argv[++i];
        }
        if (name == "--reps") {
            const auto r = parse_integer(value.c_str(), 1, kMaxRepeats);
            if (!r) return fail("--reps '" + value + "' is not an integer in 1.." + std::to_string(kMaxRepeats));
            out.options.reps = static_cast<int>(*r);
        } else if (name == "--warmup") {
            const auto w = parse_integer(value.c_str(), 0, kMaxRepeats);
            if (!w) return fail("--warmup '" + value + "' is not an integer in 0.." + std::to_string(kMaxRepeats));
            out.options.warmup = static_cast<int>(*w);
        } else if (name == "--seed") {
            const auto s = parse_seed(value.c_str());
            if (!s) return fail("--seed '" + value + "' is not a non-negative 64-bit integer");
            out.options.seed = *s;
        } else if (name == "--check") {
            const auto mode = parse_check_mode(value);
            if (!mode) return fail("--check '" + value + "' is not one of auto, cpu, cublas, none");
            out.options.check = *mode;
        } else {
            return fail("unknown option '" + arg + "'");
        }
    }
    if (!sizes.empty()) out.options.sizes = sizes;
    if (env_reps != nullptr) {
        const auto r = parse_integer(env_reps, 1, kMaxRepeats);
        if (!r) {
            return fail(std::string("PROFKIT_REPS='") + env_reps + "' is not an integer in 1.." +
                        std::to_string(kMaxRepeats));
        }
        out.options.reps = static_cast<int>(*r);
    }
    if (env_warmup != nullptr) {
        const auto w = parse_integer(env_warmup, 0, kMaxRepeats);
        if (!w) {
            return fail(std::string("PROFKIT_WARMUP='") + env_warmup + "' is not an integer in 0.." +
                        std::to_string(kMaxRepeats));
        }
        out.options.warmup = static_cast<int>(*w);
    }
    return out;
}

// Parses the real command line and environment. Returns the exit code when the program must
// stop now (0 after --help, kUsageExitCode after printing the error and usage to stderr),
// or std::nullopt with *options filled when it should run.
inline std::optional<int> options_from_command_line(int argc, const char* const* argv, Options* options) {
    const char* prog = argc > 0 ? argv[0] : "matmul";
    const ParsedArgs parsed =
        parse_args(argc, argv, std::getenv("PROFKIT_REPS"), std::getenv("PROFKIT_WARMUP"));
    switch (parsed.status) {
        case ParseStatus::Help:
            std::fputs(usage(prog).c_str(), stdout);
            return 0;
        case ParseStatus::Error:
            std::fprintf(stderr, "%s: error: %s\n%s", prog, parsed.error.c_str(), usage(prog).c_str());
            return kUsageExitCode;
        case ParseStatus::Run:
            break;
    }
    *options = parsed.options;
    return std::nullopt;
}

}  // namespace profkit
