// Host-side count of shared-memory wavefronts for every warp-tiled configuration (cuda/matmul_warptiled.cu),
// using the kernel's own index functions (Config::a_load_row, a_col, lane_row, ...). Prints one line per config:
//   config N a_store W b_store W a_read W b_read W a_permutation 0|1 a_float4 0|1
// W: the most wavefronts one shared-memory instruction of one warp needs. Scalar (32-bit) accesses are served
// per warp: wavefronts = the most distinct words any one of the 32 banks holds. 128-bit accesses are served a
// quarter warp (8 lanes) at a time: the count is the worst quarter's. Identical addresses are one word
// (broadcast). a_permutation: a_col(k, .) maps the tile's m one to one into its row (0..A_STRIDE-1) for every k; a_float4:
// four consecutive m (from a multiple of 4) stay four consecutive, 16 B aligned slots, as the LDS.128 reads need.
#define PROFKIT_NO_MAIN
#include "../../cuda/matmul_warptiled.cu"

#include <cstdio>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace {

// Wavefronts of one access: `words` holds each active lane's word address (32-bit units).
int wavefronts(const std::vector<long>& words) {
    std::map<int, std::set<long>> per_bank;
    for (long w : words) per_bank[static_cast<int>(w % 32)].insert(w);
    int most = 0;
    for (const auto& kv : per_bank) most = std::max(most, static_cast<int>(kv.second.size()));
    return most;
}

// A 128-bit access: each lane's 4 words, served 8 lanes at a time.
int wavefronts128(const std::vector<long>& first_words) {
    int worst = 0;
    for (size_t q = 0; q < first_words.size(); q += 8) {
        std::vector<long> words;
        for (size_t l = q; l < q + 8 && l < first_words.size(); ++l)
            for (int j = 0; j < 4; ++j) words.push_back(first_words[l] + j);
        worst = std::max(worst, wavefronts(words));
    }
    return worst;
}

template <typename C>
void report(int index) {
    int a_store = 0, b_store = 0, a_read = 0, b_read = 0;
    for (int warp = 0; warp < C::WARPS; ++warp) {
        for (int p = 0; p < C::A_PASSES; ++p)
            for (int q = 0; q < 4; ++q) {  // the four scalar STS of one float4 of A
                std::vector<long> words;
                for (int lane = 0; lane < 32; ++lane) {
                    const int tid = warp * 32 + lane;
                    const int k = C::a_load_k(tid) + q, m = C::a_load_row(tid) + p * C::A_ROW_STEP;
                    words.push_back(static_cast<long>(k) * C::A_STRIDE + C::a_col(k, m));
                }
                a_store = std::max(a_store, wavefronts(words));
            }
        for (int p = 0; p < C::B_PASSES; ++p) {
            std::vector<long> words;
            for (int lane = 0; lane < 32; ++lane) {
                const int tid = warp * 32 + lane;
                words.push_back(static_cast<long>(C::b_load_row(tid) + p * C::B_ROW_STEP) * C::BN + C::b_load_col(tid));
            }
            b_store = std::max(b_store, wavefronts128(words));
        }
        for (int k = 0; k < C::BK; ++k) {
            for (int wm = 0; wm < C::WMITER; ++wm)
                for (int i = 0; i < C::TM; i += 4) {
                    std::vector<long> words;
                    for (int lane = 0; lane < 32; ++lane)
                        words.push_back(static_cast<long>(k) * C::A_STRIDE +
                                        C::a_col(k, C::warp_row(warp) + wm * C::WSUBM + C::lane_row(lane) + i));
                    a_read = std::max(a_read, wavefronts128(words));
                }
            for (int wn = 0; wn < C::WNITER; ++wn)
                for (int j = 0; j < C::TN; j += 4) {
                    std::vector<long> words;
                    for (int lane = 0; lane < 32; ++lane)
                        words.push_back(static_cast<long>(k) * C::BN + C::warp_col(warp) + wn * C::WSUBN +
                                        C::lane_col(lane) + j);
                    b_read = std::max(b_read, wavefronts128(words));
                }
        }
    }
    bool permutation = true, float4_intact = true;
    for (int k = 0; k < C::BK; ++k) {
        std::set<int> slots;
        for (int m = 0; m < C::BM; ++m) {
            const int col = C::a_col(k, m);
            permutation = permutation && col >= 0 && col < C::A_STRIDE && slots.insert(col).second;
            if (m % 4 == 0) float4_intact = float4_intact && col % 4 == 0;
            else float4_intact = float4_intact && col == C::a_col(k, m - 1) + 1;
        }
    }
    // The interior body: cp.async writes one 16 B chunk of A per lane into the row-major a_rows tile, and the
    // same lane reads it back with one LDS.128 before its transposing stores (the a_store count above).
    int rows_a_access = 0;
    for (int warp = 0; warp < C::WARPS; ++warp)
        for (int p = 0; p < C::A_PASSES; ++p) {
            std::vector<long> words;
            for (int lane = 0; lane < 32; ++lane) {
                const int tid = warp * 32 + lane;
                words.push_back(static_cast<long>(C::a_load_row(tid) + p * C::A_ROW_STEP) * C::BK + C::a_load_k(tid));
            }
            rows_a_access = std::max(rows_a_access, wavefronts128(words));
        }
    std::printf("config %d a_store %d b_store %d a_read %d b_read %d a_permutation %d a_float4 %d rows_a %d\n", index,
                a_store, b_store, a_read, b_read, permutation ? 1 : 0, float4_intact ? 1 : 0, rows_a_access);
}

template <size_t... I>
void report_all(std::index_sequence<I...>) {
    (report<typename std::tuple_element<I, warptile::Configs>::type>(static_cast<int>(I)), ...);
}

}  // namespace

int main() {
    report_all(std::make_index_sequence<std::tuple_size<warptile::Configs>::value>{});
    return 0;
}
