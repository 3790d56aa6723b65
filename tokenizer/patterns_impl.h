/* The text of the split patterns lipi knows, as PCRE2/Oniguruma text, each
 * spelled once; patterns.c names them (lipi_split_pattern), and static
 * tables in tokenizer/ (read_gguf.c) use these macros. The pre-tokenizer
 * compiles them, the readers put them into the tokenizers they build, and
 * the scanner (scanner.c) recognises them byte for byte to run its
 * hand-written equivalent instead of the regex. */
#ifndef LIPI_PATTERNS_IMPL_H
#define LIPI_PATTERNS_IMPL_H

#define PAT_GPT2                                                                   \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

#define PAT_CONTRACTIONS                                                           \
    "('s|'S|'t|'T|'re|'rE|'Re|'RE|'ve|'vE|'Ve|'VE|'m|'M|'ll|'lL|'Ll|'LL|'d|'D)"

/* tiktoken's cl100k_base and o200k_base pat_str, verbatim. */
#define PAT_CL100K                                                                 \
    PAT_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
                     "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

#define PAT_O200K                                                                  \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+" \
    PAT_CONTRACTIONS "?"                                                             \
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*" \
    PAT_CONTRACTIONS "?"                                                             \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* lipi's "indic" pattern. A word is a letter of one script followed by
 * letters of that script, combining marks (any \p{M}: matras, virama, nukta,
 * anusvara, accents) and ZWNJ/ZWJ, so the word ends where the script
 * changes. `[^\P{L}\P{Deva}]` is "a letter that is Devanagari": script
 * properties alone would also take the script's digits and signs. A word is
 * spelled L+(?:M+L*)*+ rather than L(?:L|M)*: the same strings, but a loop
 * per run of marks instead of per character (faster), and possessive, which
 * Oniguruma reads the same way and which keeps PCRE2's JIT stack flat on
 * long unspaced lines (Thai, Sanskrit compounds). Nothing after a word can
 * fail, so giving up backtracking changes no match. Written in
 * the syntax PCRE2 and Oniguruma share, so a tokenizer.json that carries it
 * splits the same way in Hugging Face tokenizers. */
#define ZW "\\x{200C}\\x{200D}"
#define LET(S) "[^\\P{L}\\P{" S "}]"
#define WORD(S) LET(S) "+(?:[\\p{M}" ZW "]+" LET(S) "*)*+"
#define JA_ALT LET("Han") "|" LET("Hiragana") "|" LET("Katakana")
#define WORD_JA "(?:" JA_ALT "|\\x{30FC})(?:" JA_ALT "|[\\x{30FC}\\p{M}" ZW "])*+"
#define LISTED                                                                     \
    "\\p{Latin}\\p{Devanagari}\\p{Bengali}\\p{Tamil}\\p{Telugu}\\p{Gujarati}"       \
    "\\p{Kannada}\\p{Malayalam}\\p{Gurmukhi}\\p{Oriya}\\p{Sinhala}\\p{Ol_Chiki}"    \
    "\\p{Meetei_Mayek}\\p{Arabic}\\p{Cyrillic}\\p{Greek}\\p{Armenian}\\p{Hebrew}"   \
    "\\p{Georgian}\\p{Thai}\\p{Lao}\\p{Tibetan}\\p{Myanmar}\\p{Khmer}\\p{Ethiopic}" \
    "\\p{Hangul}\\p{Han}\\p{Hiragana}\\p{Katakana}"
#define LET_OTHER "[^\\P{L}" LISTED "]"
#define WORD_OTHER "(?:" LET_OTHER "|\\p{M})" LET_OTHER "*(?:[\\p{M}" ZW "]+" LET_OTHER "*)*+"

#define PAT_INDIC INDIC_WORDS "|" INDIC_NUMBER INDIC_REST
#define INDIC_WORDS                                                                \
    " ?(?:" WORD("Latin") "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"                           \
    "|" WORD("Devanagari") "|" WORD("Bengali") "|" WORD("Tamil") "|" WORD("Telugu") \
    "|" WORD("Gujarati") "|" WORD("Kannada") "|" WORD("Malayalam")                  \
    "|" WORD("Gurmukhi") "|" WORD("Oriya") "|" WORD("Sinhala") "|" WORD("Ol_Chiki") \
    "|" WORD("Meetei_Mayek") "|" WORD("Arabic") "|" WORD("Cyrillic")                \
    "|" WORD("Greek") "|" WORD("Armenian") "|" WORD("Hebrew") "|" WORD("Georgian")  \
    "|" WORD("Thai") "|" WORD("Lao") "|" WORD("Tibetan") "|" WORD("Myanmar")        \
    "|" WORD("Khmer") "|" WORD("Ethiopic") "|" WORD("Hangul") "|" WORD_JA           \
    "|" WORD_OTHER ")"

/* The indic pattern as the Unigram trainer uses it: numbers keep a leading
 * space like words (trainer/unigram.c derives it from PAT_INDIC's text). */
#define PAT_INDIC_UNIGRAM INDIC_WORDS "| ?" INDIC_NUMBER INDIC_REST

#define INDIC_NUMBER "(?:\\p{N}\\p{M}*){1,3}"
#define INDIC_REST                                                                 \
    "| ?[^\\s\\p{L}\\p{N}\\p{M}][^\\s\\p{L}\\p{N}]*[\\r\\n]*"                         \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* tiktoken's patterns as npm tiktoken (OpenAI's Rust core) ships them and
 * llama.cpp's pre types name them: the contractions caseless. */
#define CONTRACTIONS_CASELESS "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
#define PAT_CL100K_TIKTOKEN                                                         \
    CONTRACTIONS_CASELESS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_QWEN2                                                                   \
    CONTRACTIONS_CASELESS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define O200K_WORD_LOWER "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
#define O200K_WORD_UPPER "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
#define PAT_O200K_TIKTOKEN                                                          \
    O200K_WORD_LOWER CONTRACTIONS_CASELESS "?|" O200K_WORD_UPPER CONTRACTIONS_CASELESS \
    "?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define PAT_TEKKEN                                                                  \
    O200K_WORD_LOWER "|" O200K_WORD_UPPER                                           \
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* llama.cpp's gpt2 pre type: GPT-2's pattern without the final \s+. */
#define PAT_GPT2_NO_TRAILING_SPACE                                                   \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"

#endif
