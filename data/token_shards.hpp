// token_shards.hpp: token shard files in llm.c's format (karpathy/llm.c dev/data/data_common.py,
// llmc/dataloader.h), so that shards move both ways between ampgrad and llm.c.
//
//   bytes [0, 1024)   256 little-endian int32: [0] magic, [1] version, [2] token count, the rest 0
//   bytes [1024, ...) the tokens: uint16 (GPT-2: magic 20240520, version 1)
//                                 or uint32 (Llama 3: magic 20240801, version 7)
//
// A shard is written whole or not at all (ShardWriter: a temporary name, fsync, rename), checked
// by streaming through it (check_shard never maps it, so a check leaves nothing resident), and read
// through a read-only memory map (MappedShard) whose pages are handed back after each read.
//
//   data::ShardWriter w("out/shakespeare_train_000001.bin", data::ShardDtype::kUint16);
//   w.append(ids);  w.finish();                        // atomically in place
//   data::MappedShard s("out/shakespeare_train_000001.bin");
//   s.read(start, n, dst);                             // n tokens as int64
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ampgrad::data {

enum class ShardDtype { kUint16, kUint32 };

constexpr int64_t kShardHeaderInts = 256;
constexpr int64_t kShardHeaderBytes = kShardHeaderInts * 4;
constexpr int32_t kGpt2ShardMagic = 20240520, kGpt2ShardVersion = 1;       // uint16 tokens
constexpr int32_t kLlama3ShardMagic = 20240801, kLlama3ShardVersion = 7;   // uint32 tokens

struct ShardHeader {
    ShardDtype dtype = ShardDtype::kUint16;
    int64_t num_tokens = 0;
    int64_t token_bytes() const { return dtype == ShardDtype::kUint16 ? 2 : 4; }
    int64_t file_bytes() const { return kShardHeaderBytes + num_tokens * token_bytes(); }
};

// uint16 when every id of a vocabulary of this size fits in it (V <= 65536), else uint32.
ShardDtype shard_dtype_for_vocab(int64_t vocab_size);
const char* shard_dtype_name(ShardDtype dtype);   // "uint16" / "uint32"

// The 1024 header bytes of a shard of `num_tokens` tokens.
std::string encode_shard_header(ShardDtype dtype, int64_t num_tokens);
// Reads and checks the header of `path` (bad magic, unknown version, a negative count, a file whose
// size disagrees with the count): FormatError naming the file and the byte offset of the fault.
ShardHeader read_shard_header(const std::string& path);

// What check_shard found.
struct ShardCheck {
    ShardHeader header;
    int64_t max_token = -1;   // the largest id (-1 for an empty shard)
};
// read_shard_header, then every token streamed in chunks: FormatError naming the file and the byte
// offset of the first token id >= vocab_size (vocab_size <= 0: no id check). The shard is read with
// pread into one 1 M-token buffer, never mapped, so the check adds nothing to the resident set (the
// kernel's page cache keeps what it read, which also warms the training reads that follow).
ShardCheck check_shard(const std::string& path, int64_t vocab_size);

// Writes one shard: tokens are appended in pieces, and finish() gives the file its header,
// fsyncs it and renames it into place (then fsyncs the folder). A writer destroyed before
// finish() removes its temporary file: an interrupted run never leaves a shard that looks whole.
class ShardWriter {
public:
    ShardWriter(std::string path, ShardDtype dtype);
    ~ShardWriter();
    ShardWriter(const ShardWriter&) = delete;
    ShardWriter& operator=(const ShardWriter&) = delete;

    // ValueError naming the shard for an id that is negative or does not fit the dtype (then none
    // of the call's ids is taken).
    void append(const int32_t* ids, size_t n);
    void append(const std::vector<int32_t>& ids) { append(ids.data(), ids.size()); }
    int64_t num_tokens() const { return num_tokens_; }
    void finish();

private:
    std::string path_, tmp_path_;
    ShardDtype dtype_;
    int fd_ = -1;
    int64_t num_tokens_ = 0;
    std::vector<char> buffer_;
    void flush_buffer();
};

// One shard mapped read-only. Reading copies tokens out (widened to int64) and then advises the
// kernel that this process no longer needs the pages (madvise MADV_DONTNEED), so the resident set
// stays at the pages of one read, whatever the shard's size.
class MappedShard {
public:
    explicit MappedShard(std::string path);   // read_shard_header's checks, then mmap
    ~MappedShard();
    MappedShard(const MappedShard&) = delete;
    MappedShard& operator=(const MappedShard&) = delete;

    const std::string& path() const { return path_; }
    const ShardHeader& header() const { return header_; }
    int64_t num_tokens() const { return header_.num_tokens; }
    // tokens [start, start + n) into dst; IndexError outside the shard.
    void read(int64_t start, int64_t n, int64_t* dst) const;

private:
    std::string path_;
    ShardHeader header_;
    const unsigned char* map_ = nullptr;
    size_t map_bytes_ = 0;
};

// The shards that `spec` names, sorted by name: a folder (every *.bin in it), a glob pattern
// (llm.c's "dir/fineweb_train_*.bin"), or one file. split "train" keeps names containing "_train_"
// (or, when none does, every name not containing "_val_"); "val" keeps names containing "_val_";
// "" keeps all. IOError when nothing matches.
std::vector<std::string> list_shards(const std::string& spec, const std::string& split);
// Whether `spec` names shards rather than a text file: a folder, a glob, or a *.bin file that starts
// with one of llm.c's magic numbers.
bool names_token_shards(const std::string& spec);

}  // namespace ampgrad::data
