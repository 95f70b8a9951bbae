// prepare.cpp: `ampgrad data prepare`'s run (data/prepare.hpp): the output folder locked, the
// resume decision, then the pipeline reader -> encoder threads -> shard filler, with meta.json
// rewritten (atomically) as each shard is done.
#include "data/prepare.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "data/parallel_encoder.hpp"

namespace ampgrad::data {

namespace fs = std::filesystem;

namespace {

// An exclusive lock on OUT/.prepare.lock for the run: a second `data prepare` into the same folder
// fails at once instead of mixing its shards in.
class OutputLock {
public:
    explicit OutputLock(const std::string& dir) : path_((fs::path(dir) / ".prepare.lock").string()) {
        fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd_ < 0) throw IOError(fmt::format("data prepare: cannot create the lock file {}", path_));
        if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            ::close(fd_);
            throw IOError(fmt::format("data prepare: another `ampgrad data prepare` is writing into {} (it holds {})", dir,
                                      path_));
        }
    }
    ~OutputLock() { ::close(fd_); }
    OutputLock(const OutputLock&) = delete;
    OutputLock& operator=(const OutputLock&) = delete;

private:
    std::string path_;
    int fd_ = -1;
};

// meta.json: the settings, the shards done so far and, at the end, the totals.
class MetaRecorder {
public:
    MetaRecorder(std::string path, nlohmann::json settings, const std::vector<ShardRecord>& kept)
        : path_(std::move(path)), meta_(std::move(settings)) {
        for (const ShardRecord& r : kept) shards_[r.index] = r;
    }
    void shard_done(const ShardRecord& r) {
        const bool known = shards_.contains(r.index) && shards_[r.index].tokens == r.tokens;
        shards_[r.index] = r;
        if (!known) write("in_progress");
    }
    void write(const char* status, const nlohmann::json& totals = nlohmann::json::object()) {
        nlohmann::json m = meta_;
        m["format"] = "llm.c token shards (karpathy/llm.c dev/data/data_common.py): 256 int32 header, then the tokens";
        m["status"] = status;
        m["shards"] = nlohmann::json::array();
        for (const auto& [index, r] : shards_)
            m["shards"].push_back({{"index", index}, {"file", r.file}, {"split", shard_split(index)}, {"tokens", r.tokens},
                                   {"done", true}});
        for (const auto& [key, value] : totals.items()) m[key] = value;
        write_file_atomic(path_, m.dump(2) + "\n");
    }

private:
    std::string path_;
    nlohmann::json meta_;
    std::map<int64_t, ShardRecord> shards_;
};

struct RunCounters {
    int64_t input_bytes = 0, documents = 0, tokens = 0;
};

// Reader -> encoder threads -> filler: jobs of about piece_bytes, written in submission order.
void run_pipeline(DocumentReader& reader, OrderedEncoder& encoder, ShardFiller& filler, size_t job_bytes,
                  PrepareProgress& progress, const PrepareProgressFn& report,
                  std::chrono::steady_clock::time_point start) {
    auto write_oldest = [&] {
        const EncodedJob done = encoder.take();
        filler.append(done.tokens);
        progress.input_bytes += done.input_bytes;
        progress.documents += done.documents;
        progress.tokens = filler.total_tokens();
        progress.shards = static_cast<int64_t>(filler.shards().size());
        progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (report) report(progress);
    };
    auto submit = [&](EncodeJob& job) {
        if (encoder.in_flight() >= encoder.window()) write_oldest();
        encoder.submit(std::move(job));
        job = EncodeJob{};
    };
    EncodeJob job;
    size_t job_text = 0;
    for (TextPiece piece; reader.next(piece);) {
        job.input_bytes += piece.input_bytes;
        job.documents += piece.starts_document ? 1 : 0;
        job_text += piece.text.size();
        job.pieces.push_back(std::move(piece));
        if (job_text >= job_bytes) {
            submit(job);
            job_text = 0;
        }
    }
    if (!job.pieces.empty()) submit(job);
    while (encoder.in_flight() > 0) write_oldest();
}

// The inputs may not lie in the output folder, nor the output folder in an input folder (its shards
// would become inputs of the next run).
void check_inputs_outside(const std::vector<InputFile>& files, const std::vector<std::string>& inputs,
                          const std::string& output) {
    const std::string out = fs::weakly_canonical(fs::absolute(output)).string() + "/";
    for (const std::string& in : inputs)
        if (fs::is_directory(in) && out.starts_with(fs::weakly_canonical(fs::absolute(in)).string() + "/"))
            throw ValueError(fmt::format("data prepare: the output folder {} is inside the input folder {} (its shards "
                                         "would be read as text next time); write the shards elsewhere", output, in));
    for (const InputFile& f : files)
        if (fs::weakly_canonical(f.path).string().starts_with(out))
            throw ValueError(fmt::format("data prepare: the input {} is inside the output folder {}; write the shards "
                                         "elsewhere", f.path, output));
}

void check_name(const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
        throw ValueError(fmt::format("data prepare: --name \"{}\": expected a file name prefix (not empty, no '/')", name));
}

PrepareResult up_to_date_result(const nlohmann::json& meta, const std::string& meta_path) {
    PrepareResult r;
    r.meta_path = meta_path;
    r.up_to_date = true;
    r.tokens = meta.value("total_tokens", int64_t{0});
    r.documents = meta.value("documents", int64_t{0});
    r.input_bytes = meta.value("input_bytes", int64_t{0});
    for (const nlohmann::json& s : meta.at("shards"))
        r.shards.push_back({s.at("index").get<int64_t>(), s.at("file").get<std::string>(), s.at("tokens").get<int64_t>(), true});
    r.kept_shards = static_cast<int64_t>(r.shards.size());
    return r;
}

}  // namespace

PrepareResult prepare_token_shards(const PrepareOptions& o, const std::vector<InputFile>& files,
                                   const PrepareTokenizer& tok, const PrepareProgressFn& report) {
    const auto start = std::chrono::steady_clock::now();
    if (o.output.empty()) throw ValueError("data prepare: --output names no folder");
    check_inputs_outside(files, o.inputs, o.output);
    ShardPlan plan{o.output, o.name, shard_dtype_for_vocab(tok.tokenizer.vocab_size()), o.shard_tokens, o.val_tokens};
    if (plan.name.empty()) plan.name = fs::absolute(o.output).lexically_normal().filename().string();
    if (plan.name.empty()) plan.name = fs::absolute(o.output).lexically_normal().parent_path().filename().string();
    check_name(plan.name);
    check_shard_plan(plan);
    std::error_code ec;
    fs::create_directories(o.output, ec);
    if (ec || !fs::is_directory(o.output))
        throw IOError(fmt::format("data prepare: cannot create the output folder {}: {}", o.output, ec.message()));
    OutputLock lock(o.output);
    const nlohmann::json settings = prepare_settings_json(plan, files, tok);
    const std::string meta_path = (fs::path(o.output) / "meta.json").string();
    ResumePlan resume = plan_resume(plan, settings, o.overwrite);
    if (resume.complete) return up_to_date_result(resume.previous, meta_path);

    MetaRecorder meta(meta_path, settings, resume.kept);
    meta.write("in_progress");
    ShardFiller filler(plan, resume.keep, [&](const ShardRecord& r) { meta.shard_done(r); });
    const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    PrepareProgress progress;
    for (const InputFile& f : files) progress.total_input_bytes += f.bytes;
    {
        DocumentReader reader(files, o.piece_bytes);
        OrderedEncoder encoder(tok.tokenizer, threads, 2 * static_cast<size_t>(threads) + 2);
        run_pipeline(reader, encoder, filler, o.piece_bytes, progress, report, start);
    }
    filler.finish();
    if (filler.total_tokens() == 0)
        throw ValueError(fmt::format("data prepare: the inputs ({} files) gave no token: every document is empty and the "
                                     "{} tokenizer has no <|endoftext|>", files.size(), tok.tokenizer.kind_name()));
    meta.write("complete", {{"total_tokens", filler.total_tokens()}, {"documents", progress.documents},
                            {"input_bytes", progress.input_bytes}});
    PrepareResult r;
    r.meta_path = meta_path;
    r.shards = filler.shards();
    r.tokens = filler.total_tokens();
    r.documents = progress.documents;
    r.input_bytes = progress.input_bytes;
    for (const ShardRecord& s : r.shards) r.kept_shards += s.kept ? 1 : 0;
    r.threads = threads;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
}

}  // namespace ampgrad::data
