// parallel_encoder.cpp: worker threads encoding text pieces, results taken in order
// (data/parallel_encoder.hpp).
#include "data/parallel_encoder.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace ampgrad::data {

void encode_piece(const Tokenizer& tokenizer, const TextPiece& piece, std::vector<int32_t>& out) {
    if (piece.starts_document && tokenizer.bpe() != nullptr && tokenizer.bpe()->eot_token() >= 0)
        out.push_back(tokenizer.bpe()->eot_token());
    if (piece.text.empty()) return;
    if (tokenizer.bpe() != nullptr) {
        const std::vector<int32_t> ids = tokenizer.bpe()->encode(piece.text, /*allow_special=*/false);
        out.insert(out.end(), ids.begin(), ids.end());
        return;
    }
    const std::vector<int32_t> ids = tokenizer.encode(piece.text);
    out.insert(out.end(), ids.begin(), ids.end());
}

void encode_job(const Tokenizer& tokenizer, const EncodeJob& job, std::vector<int32_t>& out) {
    const BpeTokenizer* bpe = tokenizer.bpe();
    if (bpe == nullptr) {
        for (const TextPiece& p : job.pieces) encode_piece(tokenizer, p, out);
        return;
    }
    std::vector<std::string_view> texts;
    texts.reserve(job.pieces.size());
    for (const TextPiece& p : job.pieces) texts.emplace_back(p.text);
    std::vector<int32_t> ids;
    std::vector<size_t> ends;
    bpe->encode_each(texts, ids, ends);
    out.reserve(out.size() + ids.size() + job.pieces.size());
    size_t begin = 0;
    for (size_t i = 0; i < job.pieces.size(); ++i) {
        if (job.pieces[i].starts_document && bpe->eot_token() >= 0) out.push_back(bpe->eot_token());
        out.insert(out.end(), ids.begin() + static_cast<std::ptrdiff_t>(begin), ids.begin() + static_cast<std::ptrdiff_t>(ends[i]));
        begin = ends[i];
    }
}

OrderedEncoder::OrderedEncoder(Tokenizer tokenizer, int threads, size_t window)
    : tokenizer_(std::move(tokenizer)), window_(std::max<size_t>(window, 1)) {
    if (threads < 1) throw ValueError(fmt::format("data prepare: --threads {} (expected at least 1)", threads));
    workers_.reserve(static_cast<size_t>(threads));
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

OrderedEncoder::~OrderedEncoder() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
        todo_.clear();
    }
    todo_ready_.notify_all();
    for (std::thread& t : workers_) t.join();
}

void OrderedEncoder::work() {
    for (;;) {
        std::shared_ptr<Slot> slot;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            todo_ready_.wait(lock, [this] { return stopping_ || !todo_.empty(); });
            if (stopping_) return;
            slot = std::move(todo_.front());
            todo_.pop_front();
        }
        EncodedJob result{{}, slot->job.input_bytes, slot->job.documents};
        std::exception_ptr error;
        try {
            encode_job(tokenizer_, slot->job, result.tokens);
        } catch (...) {
            error = std::current_exception();
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            slot->result = std::move(result);
            slot->error = error;
            slot->job.pieces.clear();   // the text is not needed any more
            slot->done = true;
        }
        slot_done_.notify_all();
    }
}

void OrderedEncoder::submit(EncodeJob job) {
    auto slot = std::make_shared<Slot>();
    slot->job = std::move(job);
    {
        std::unique_lock<std::mutex> lock(mutex_);
        if (order_.size() >= window_)
            throw InternalError(fmt::format("OrderedEncoder: submit with {} jobs in flight (window {}): take() first",
                                            order_.size(), window_));
        order_.push_back(slot);
        todo_.push_back(std::move(slot));
    }
    todo_ready_.notify_one();
}

EncodedJob OrderedEncoder::take() {
    std::shared_ptr<Slot> slot;
    {
        std::unique_lock<std::mutex> lock(mutex_);
        if (order_.empty()) throw InternalError("OrderedEncoder: take() with no job in flight");
        slot = order_.front();
        slot_done_.wait(lock, [&] { return slot->done; });
        order_.pop_front();
    }
    if (slot->error) std::rethrow_exception(slot->error);
    return std::move(slot->result);
}

size_t OrderedEncoder::in_flight() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_.size();
}

}  // namespace ampgrad::data
