/* Pre-tokenizers: named ones on many scripts, every Hugging Face kind,
 * replay of outputs recorded from Hugging Face tokenizers, properties over
 * random mixed-script text, JSON errors, allocation failures, threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>

#include "tokenizer/base_json.h"
#include "tests/alloc_fail.h"
#include "tokenizer/tokenizer.h"

#define HF_FIXTURE "tests/fixtures/pretokenize/hf_cases.json"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* Pieces as "text@start-end|..." with \n \r \t spelled out. */
static char *render(const lipi_pieces *p)
{
    size_t cap = 64 + p->text_len * 2 + p->count * 48;
    char *s = malloc(cap), *w = s;
    for (size_t i = 0; i < p->count; i++) {
        if (i)
            *w++ = '|';
        for (size_t k = p->text_off[i]; k < p->text_off[i + 1]; k++) {
            char c = p->text[k];
            if (c == '\n' || c == '\r' || c == '\t') {
                *w++ = '\\';
                *w++ = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            } else {
                *w++ = c;
            }
        }
        w += sprintf(w, "@%zu-%zu", p->src[i].start, p->src[i].end);
    }
    *w = '\0';
    return s;
}

static lipi_pretokenizer *named(const char *name)
{
    lipi_pretokenizer *p = NULL;
    lipi_error err;
    lipi_status st = lipi_pretokenizer_new(name, &p, &err);
    if (st != LIPI_OK)
        fail_msg("lipi_pretokenizer_new(%s): %s", name, err.msg);
    return p;
}

static lipi_pretokenizer *from_json_text(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j)
        fail_msg("bad test JSON: %s", je.text);
    lipi_pretokenizer *p = NULL;
    lipi_error err;
    lipi_status st = lipi_pretokenizer_from_json(j, "pre_tokenizer", &p, &err);
    json_decref(j);
    if (st != LIPI_OK)
        fail_msg("from_json(%s): %s", text, err.msg);
    return p;
}

/* Pre-tokenizes s with p and compares the rendering with want. */
static void check(const lipi_pretokenizer *p, const char *s, const char *want)
{
    lipi_pieces out = {0};
    lipi_error err;
    lipi_status st = lipi_pretokenize(p, s, strlen(s), &out, &err);
    if (st != LIPI_OK)
        fail_msg("lipi_pretokenize(\"%s\"): %s", s, err.msg);
    char *got = render(&out);
    if (strcmp(got, want) != 0)
        print_error("input: \"%s\"\n  want: %s\n  got:  %s\n", s, want, got);
    assert_string_equal(got, want);
    free(got);
    lipi_pieces_free(&out);
}

static void check_named(const char *name, const char *s, const char *want)
{
    lipi_pretokenizer *p = named(name);
    check(p, s, want);
    lipi_pretokenizer_free(p);
}

static void check_json(const char *json, const char *s, const char *want)
{
    lipi_pretokenizer *p = from_json_text(json);
    check(p, s, want);
    lipi_pretokenizer_free(p);
}

static const char *const NAMES[] = {"indic", "cl100k", "o200k", "gpt2", "bytelevel",
                                    "bert", "whitespace", "metaspace", "digits"};
#define N_NAMES (sizeof NAMES / sizeof *NAMES)

/* ------------------------------------------------------------------------ */
/* Named pre-tokenizers                                                      */
/* ------------------------------------------------------------------------ */

static void test_indic_keeps_letters_with_their_marks(void **state)
{
    (void)state;
    check_named("indic", "हिन्दी में लिखा", "हिन्दी@0-18| में@18-28| लिखा@28-41");
    check_named("indic", "क्षि ने", "क्षि@0-12| ने@12-19");
    check_named("indic", "தமிழ் மொழி", "தமிழ்@0-15| மொழி@15-28");
    check_named("indic", "বাংলা ভাষা", "বাংলা@0-15| ভাষা@15-28");
    check_named("indic", "ગુજરાતી ਪੰਜਾਬੀ", "ગુજરાતી@0-21| ਪੰਜਾਬੀ@21-40");
}

static void test_cl100k_splits_hindi_at_vowel_signs_and_indic_does_not(void **state)
{
    (void)state;
    check_named("cl100k", "हिन्दी", "ह@0-3|िन@3-9|्द@9-15|ी@15-18");
    check_named("indic", "हिन्दी", "हिन्दी@0-18");
    check_named("cl100k", "தமிழ்", "தம@0-6|ிழ@6-12|்@12-15");
    check_named("indic", "தமிழ்", "தமிழ்@0-15");
}

static void test_indic_splits_where_the_script_changes(void **state)
{
    (void)state;
    check_named("indic", "हिन्दीEnglish नमस्ते", "हिन्दी@0-18|English@18-25| नमस्ते@25-44");
    check_named("indic", "mixedहिन्दी", "mixed@0-5|हिन्दी@5-23");
    check_named("indic", "Ελληνικάрусский", "Ελληνικά@0-16|русский@16-30");
    /* o200k keeps the whole run: \p{L} and \p{M} of any script */
    check_named("o200k", "हिन्दीEnglish", "हिन्दीEnglish@0-25");
}

static void test_indic_keeps_one_leading_space_with_the_word(void **state)
{
    (void)state;
    check_named("indic", " नमस्ते", " नमस्ते@0-19");
    check_named("indic", "  नमस्ते", " @0-1| नमस्ते@1-20");
    check_named("indic", "It's we'll DON'T", "It's@0-4| we'll@4-10| DON'T@10-16");
}

static void test_english_in_every_named_pre_tokenizer(void **state)
{
    (void)state;
    const char *s = "Hello world, it's 2024!";
    const char *want[N_NAMES] = {
        "Hello@0-5| world@5-11|,@11-12| it's@12-17| @17-18|202@18-21|4@21-22|!@22-23",
        "Hello@0-5| world@5-11|,@11-12| it@12-15|'s@15-17| @17-18|202@18-21|4@21-22|!@22-23",
        "Hello@0-5| world@5-11|,@11-12| it's@12-17| @17-18|202@18-21|4@21-22|!@22-23",
        "Hello@0-5| world@5-11|,@11-12| it@12-15|'s@15-17| 2024@17-22|!@22-23",
        "Hello@0-5|Ġworld@5-11|,@11-12|Ġit@12-15|'s@15-17|Ġ2024@17-22|!@22-23",
        "Hello@0-5|world@6-11|,@11-12|it@13-15|'@15-16|s@16-17|2024@18-22|!@22-23",
        "Hello@0-5|world@6-11|,@11-12|it@13-15|'@15-16|s@16-17|2024@18-22|!@22-23",
        "▁Hello@0-5|▁world,@5-12|▁it's@12-17|▁2024!@17-23",
        "Hello world, it's @0-18|2@18-19|0@19-20|2@20-21|4@21-22|!@22-23",
    };
    for (size_t i = 0; i < N_NAMES; i++)
        check_named(NAMES[i], s, want[i]);
}

static void test_hindi_in_every_named_pre_tokenizer(void **state)
{
    (void)state;
    const char *s = "हिन्दी में";
    const char *want[N_NAMES] = {
        "हिन्दी@0-18| में@18-28",
        "ह@0-3|िन@3-9|्द@9-15|ी@15-18| म@18-22|ें@22-28",
        "हिन्दी@0-18| में@18-28",
        "ह@0-3|ि@3-6|न@6-9|्@9-12|द@12-15|ी@15-18| म@18-22|ें@22-28",
        "à¤¹@0-3|à¤¿@3-6|à¤¨@6-9|à¥į@9-12|à¤¦@12-15|à¥Ģ@15-18|Ġà¤®@18-22|à¥ĩà¤Ĥ@22-28",
        "हिन्दी@0-18|में@19-28",
        "हिन्दी@0-18|में@19-28",
        "▁हिन्दी@0-18|▁में@18-28",
        "हिन्दी में@0-28",
    };
    for (size_t i = 0; i < N_NAMES; i++)
        check_named(NAMES[i], s, want[i]);
}

static void test_tamil_and_bengali_in_every_named_pre_tokenizer(void **state)
{
    (void)state;
    const char *s = "தமிழ் বাংলা";
    const char *want[N_NAMES] = {
        "தமிழ்@0-15| বাংলা@15-31",
        "தம@0-6|ிழ@6-12|்@12-15| ব@15-19|াং@19-25|ল@25-28|া@28-31",
        "தமிழ்@0-15| বাংলা@15-31",
        "தம@0-6|ி@6-9|ழ@9-12|்@12-15| ব@15-19|াং@19-25|ল@25-28|া@28-31",
        "à®¤à®®@0-6|à®¿@6-9|à®´@9-12|à¯į@12-15|Ġà¦¬@15-19|à¦¾à¦Ĥ@19-25|à¦²@25-28|à¦¾@28-31",
        "தமிழ்@0-15|বাংলা@16-31",
        "தமிழ்@0-15|বাংলা@16-31",
        "▁தமிழ்@0-15|▁বাংলা@15-31",
        "தமிழ் বাংলা@0-31",
    };
    for (size_t i = 0; i < N_NAMES; i++)
        check_named(NAMES[i], s, want[i]);
}

static void test_mixed_script_in_every_named_pre_tokenizer(void **state)
{
    (void)state;
    const char *s = "हिन्दीEnglish नमस्ते";
    const char *want[N_NAMES] = {
        "हिन्दी@0-18|English@18-25| नमस्ते@25-44",
        "ह@0-3|िन@3-9|्द@9-15|ीEnglish@15-25| नमस@25-35|्त@35-41|े@41-44",
        "हिन्दीEnglish@0-25| नमस्ते@25-44",
        "ह@0-3|ि@3-6|न@6-9|्@9-12|द@12-15|ी@15-18|English@18-25| नमस@25-35|्@35-38|त@38-41|"
        "े@41-44",
        "à¤¹@0-3|à¤¿@3-6|à¤¨@6-9|à¥į@9-12|à¤¦@12-15|à¥Ģ@15-18|English@18-25|"
        "Ġà¤¨à¤®à¤¸@25-35|à¥į@35-38|à¤¤@38-41|à¥ĩ@41-44",
        "हिन्दीEnglish@0-25|नमस्ते@26-44",
        "हिन्दीEnglish@0-25|नमस्ते@26-44",
        "▁हिन्दीEnglish@0-25|▁नमस्ते@25-44",
        "हिन्दीEnglish नमस्ते@0-44",
    };
    for (size_t i = 0; i < N_NAMES; i++)
        check_named(NAMES[i], s, want[i]);
}

static void test_emoji_zwj_sequence_in_every_named_pre_tokenizer(void **state)
{
    (void)state;
    const char *s = "a 👨‍👩‍👧 b";
    const char *want[N_NAMES] = {
        "a@0-1| 👨‍👩‍👧@1-20| b@20-22",
        "a@0-1| 👨‍👩‍👧@1-20| b@20-22",
        "a@0-1| 👨‍👩‍👧@1-20| b@20-22",
        "a@0-1| 👨‍👩‍👧@1-20| b@20-22",
        "a@0-1|ĠðŁĳ¨âĢįðŁĳ©âĢįðŁĳ§@1-20|Ġb@20-22",
        "a@0-1|👨‍👩‍👧@2-20|b@21-22",
        /* Rust's \w counts ZWJ (Join_Control) as a word character */
        "a@0-1|👨@2-6|‍@6-9|👩@9-13|‍@13-16|👧@16-20|b@21-22",
        "▁a@0-1|▁👨‍👩‍👧@1-20|▁b@20-22",
        "a 👨‍👩‍👧 b@0-22",
    };
    for (size_t i = 0; i < N_NAMES; i++)
        check_named(NAMES[i], s, want[i]);
    /* variation selectors and skin tones are marks or symbols: they stay */
    check_named("indic", "❤️ 👍🏽", "❤️@0-6| 👍🏽@6-15");
}

static void test_digits_in_every_named_pre_tokenizer(void **state)
{
    (void)state;
    const char *s = "12345 ७८";
    const char *want[N_NAMES] = {
        "123@0-3|45@3-5| @5-6|७८@6-12",
        "123@0-3|45@3-5| @5-6|७८@6-12",
        "123@0-3|45@3-5| @5-6|७८@6-12",
        "12345@0-5| ७८@5-12",
        "12345@0-5|Ġà¥Ńà¥®@5-12",
        "12345@0-5|७८@6-12",
        "12345@0-5|७८@6-12",
        "▁12345@0-5|▁७८@5-12",
        "1@0-1|2@1-2|3@2-3|4@3-4|5@4-5| @5-6|७@6-9|८@9-12",
    };
    for (size_t i = 0; i < N_NAMES; i++)
        check_named(NAMES[i], s, want[i]);
    /* Devanagari digits are numbers, not Devanagari letters */
    check_named("indic", "०१२३४ क", "०१२@0-9|३४@9-15| क@15-19");
}

static void test_newlines_and_crlf(void **state)
{
    (void)state;
    const char *s = "a\nb\r\n\r\nc";
    check_named("indic", s, "a@0-1|\\n@1-2|b@2-3|\\r\\n\\r\\n@3-7|c@7-8");
    check_named("cl100k", s, "a@0-1|\\n@1-2|b@2-3|\\r\\n\\r\\n@3-7|c@7-8");
    check_named("o200k", s, "a@0-1|\\n@1-2|b@2-3|\\r\\n\\r\\n@3-7|c@7-8");
    check_named("gpt2", s, "a@0-1|\\n@1-2|b@2-3|\\r\\n\\r@3-6|\\n@6-7|c@7-8");
    check_named("bytelevel", s, "a@0-1|Ċ@1-2|b@2-3|čĊč@3-6|Ċ@6-7|c@7-8");
    check_named("bert", s, "a@0-1|b@2-3|c@7-8");
    check_named("whitespace", s, "a@0-1|b@2-3|c@7-8");
    check_named("metaspace", s, "▁a\\nb\\r\\n\\r\\nc@0-8");
    check_named("digits", s, "a\\nb\\r\\n\\r\\nc@0-8");
}

static void test_empty_input_gives_no_pieces(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_NAMES; i++) {
        lipi_pretokenizer *p = named(NAMES[i]);
        lipi_pieces out = {0};
        assert_int_equal(lipi_pretokenize(p, "", 0, &out, NULL), LIPI_OK);
        assert_int_equal(out.count, 0);
        assert_int_equal(out.text_off[0], 0);
        assert_int_equal(lipi_pretokenize(p, NULL, 0, &out, NULL), LIPI_OK);
        assert_int_equal(out.count, 0);
        lipi_pieces_free(&out);
        lipi_pretokenizer_free(p);
    }
}

static void test_bytelevel_maps_bytes_and_keeps_source_offsets(void **state)
{
    (void)state;
    /* " héllo": é is C3 A9, shown as Ã ©; the space as Ġ */
    check_named("bytelevel", " héllo", "ĠhÃ©llo@0-7");
    check_json("{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true}",
               "Hello my", "ĠHello@0-5|Ġmy@5-8");
    check_json("{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,"
               "\"use_regex\":false}",
               "Hello my friend", "ĠHelloĠmyĠfriend@0-15");
    check_named("bytelevel", "i⭢j", "i@0-1|âŃ¢@1-4|j@4-5");
}

static void test_metaspace_prepends_and_splits(void **state)
{
    (void)state;
    check_named("metaspace", "Hey friend!", "▁Hey@0-3|▁friend!@3-11");
    check_named("metaspace", "Hey   friend!", "▁Hey@0-3|▁@3-4|▁@4-5|▁friend!@5-13");
    check_json("{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"prepend_scheme\":\"never\","
               "\"split\":true}",
               "Hey friend", "Hey@0-3|▁friend@3-10");
    check_json("{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"always\","
               "\"split\":false}",
               "Hey friend", "_Hey_friend@0-10");
    /* "first" prepends only to the piece that starts the input */
    check_json("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
               "{\"String\":\"<s>\"},\"behavior\":\"Isolated\",\"invert\":false},"
               "{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"prepend_scheme\":\"first\","
               "\"split\":false}]}",
               "Hey <s>how", "▁Hey▁@0-4|<s>@4-7|how@7-10");
}

static void test_split_behaviors_and_invert(void **state)
{
    (void)state;
    /* Hugging Face's split.rs test: a word regex, inverted */
    const char *fmt = "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+|[^\\\\w\\\\s]+\"},"
                      "\"behavior\":\"%s\",\"invert\":true}";
    const char *s = "How are you doing?";
    const char *want[][2] = {
        {"Removed", "How@0-3|are@4-7|you@8-11|doing@12-17|?@17-18"},
        {"Isolated", "How@0-3| @3-4|are@4-7| @7-8|you@8-11| @11-12|doing@12-17|?@17-18"},
        {"MergedWithPrevious", "How @0-4|are @4-8|you @8-12|doing@12-17|?@17-18"},
        {"MergedWithNext", "How@0-3| are@3-7| you@7-11| doing@11-17|?@17-18"},
        {"Contiguous", "How@0-3| @3-4|are@4-7| @7-8|you@8-11| @11-12|doing?@12-18"},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char json[256];
        snprintf(json, sizeof json, fmt, want[i][0]);
        check_json(json, s, want[i][1]);
    }
    /* normalizer.rs doc example: splitting the-final--countdown on '-' */
    const char *fmt2 = "{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"%s\","
                       "\"invert\":false}";
    const char *want2[][2] = {
        {"Removed", "the@0-3|final@4-9|countdown@11-20"},
        {"Isolated", "the@0-3|-@3-4|final@4-9|-@9-10|-@10-11|countdown@11-20"},
        {"MergedWithPrevious", "the-@0-4|final-@4-10|-@10-11|countdown@11-20"},
        {"MergedWithNext", "the@0-3|-final@3-9|-@9-10|-countdown@10-20"},
        {"Contiguous", "the@0-3|-@3-4|final@4-9|--@9-11|countdown@11-20"},
    };
    for (size_t i = 0; i < sizeof want2 / sizeof *want2; i++) {
        char json[256];
        snprintf(json, sizeof json, fmt2, want2[i][0]);
        check_json(json, "the-final--countdown", want2[i][1]);
    }
}

static void test_split_string_pattern_is_literal(void **state)
{
    (void)state;
    check_json("{\"type\":\"Split\",\"pattern\":{\"String\":\"a.b\"},\"behavior\":\"Removed\","
               "\"invert\":false}",
               "xa.byaxbz", "x@0-1|yaxbz@4-9");
}

static void test_punctuation_and_digits(void **state)
{
    (void)state;
    check_json("{\"type\":\"Punctuation\"}", "Hey friend!     How are you?!?",
               "Hey friend@0-10|!@10-11|     How are you@11-27|?@27-28|!@28-29|?@29-30");
    check_json("{\"type\":\"Punctuation\",\"behavior\":\"Contiguous\"}", "Wait...what?!",
               "Wait@0-4|...@4-7|what@7-11|?!@11-13");
    /* ASCII symbols count as punctuation (is_ascii_punctuation), so does । */
    check_json("{\"type\":\"Punctuation\",\"behavior\":\"Removed\"}", "a+b$c। d",
               "a@0-1|b@2-3|c@4-5| d@8-10");
    check_json("{\"type\":\"Digits\",\"individual_digits\":false}", "Hey 123 friend!",
               "Hey @0-4|123@4-7| friend!@7-15");
    check_json("{\"type\":\"Digits\",\"individual_digits\":true}", "Hey 123 friend!",
               "Hey @0-4|1@4-5|2@5-6|3@6-7| friend!@7-15");
    /* char::is_numeric takes every N*: superscripts, fractions, Devanagari */
    check_json("{\"type\":\"Digits\",\"individual_digits\":false}", "x²½ ४२",
               "x@0-1|²½@1-5| @5-6|४२@6-12");
}

static void test_bert_pre_tokenizer(void **state)
{
    (void)state;
    check_named("bert", "Hello, world! 你好", "Hello@0-5|,@5-6|world@7-12|!@12-13|你好@14-20");
    check_named("bert", "Hey friend!     How are you?!?",
                "Hey@0-3|friend@4-10|!@10-11|How@16-19|are@20-23|you@24-27|?@27-28|!@28-29|"
                "?@29-30");
}

static void test_whitespace_and_whitespace_split(void **state)
{
    (void)state;
    check_named("whitespace", "Hey man!", "Hey@0-3|man@4-7|!@7-8");
    check_named("whitespace", "\n", "");
    check_json("{\"type\":\"WhitespaceSplit\"}", "Hey, man, Good?",
               "Hey,@0-4|man,@5-9|Good?@10-15");
}

static void test_unicode_scripts_and_other_kinds(void **state)
{
    (void)state;
    check_json("{\"type\":\"UnicodeScripts\"}", "どこで生れ。Yes",
               "どこで生れ@0-15|。@15-18|Yes@18-21");
    check_json("{\"type\":\"UnicodeScripts\"}", "Apples are りんご 林檎",
               "Apples are @0-11|りんご 林檎@11-27");
    /* Hugging Face drops spaces before the first cut */
    check_json("{\"type\":\"UnicodeScripts\"}", "  abc", "abc@2-5");
    check_json("{\"type\":\"CharDelimiterSplit\",\"delimiter\":\"-\"}", "a-b--c", "a@0-1|b@2-3|c@5-6");
    check_json("{\"type\":\"FixedLength\",\"length\":3}", "Hello 👋 world",
               "Hel@0-3|lo @3-6|👋 w@6-12|orl@12-15|d@15-16");
    check_json("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"WhitespaceSplit\"},"
               "{\"type\":\"Punctuation\",\"behavior\":\"Isolated\"}]}",
               "Hey friend!     How are you?!?",
               "Hey@0-3|friend@4-10|!@10-11|How@16-19|are@20-23|you@24-27|?@27-28|!@28-29|"
               "?@29-30");
}

static void test_sequence_keeps_offsets_through_byte_level(void **state)
{
    (void)state;
    /* Digits after ByteLevel splits the mapped text yet reports input bytes */
    check_json("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\","
               "\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},"
               "{\"type\":\"Digits\",\"individual_digits\":true}]}",
               "é12", "ĠÃ©@0-2|1@2-3|2@3-4");
}

static void test_new_pattern_is_an_isolated_regex_split(void **state)
{
    (void)state;
    lipi_pretokenizer *p = NULL;
    lipi_error err;
    assert_int_equal(lipi_pretokenizer_new_pattern("[0-9]+", &p, &err), LIPI_OK);
    check(p, "ab12cd345", "ab@0-2|12@2-4|cd@4-6|345@6-9");
    json_t *j = lipi_pretokenizer_to_json(p);
    json_t *want = json_loads("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[0-9]+\"},"
                              "\"behavior\":\"Isolated\",\"invert\":false}",
                              0, NULL);
    assert_true(json_equal(j, want));
    json_decref(j);
    json_decref(want);
    lipi_pretokenizer_free(p);
}

static void test_patterns_take_oniguruma_meaning_of_s_w_h(void **state)
{
    (void)state;
    lipi_pretokenizer *p = NULL;
    /* \w includes marks (Oniguruma), so a Hindi word is one match */
    assert_int_equal(lipi_pretokenizer_new_pattern("\\w+", &p, NULL), LIPI_OK);
    check(p, "हिन्दी x", "हिन्दी@0-18| @18-19|x@19-20");
    lipi_pretokenizer_free(p);
    /* \s is White_Space: U+180E is not a space; \h is a hex digit */
    assert_int_equal(lipi_pretokenizer_new_pattern("\\s+|\\h+", &p, NULL), LIPI_OK);
    check(p, "a\xe1\xa0\x8e" "b\xc2\xa0" "cafe", "a@0-1|\xe1\xa0\x8e@1-4|b@4-5|\xc2\xa0@5-7|cafe@7-11");
    lipi_pretokenizer_free(p);
    /* an escaped backslash, a class with a literal ']' and [:digit:] */
    assert_int_equal(lipi_pretokenizer_new_pattern("\\\\s|[]\\s[:digit:]]+", &p, NULL), LIPI_OK);
    check(p, "x\\sy] 1z", "x@0-1|\\s@1-3|y@3-4|] 1@4-7|z@7-8");
    lipi_pretokenizer_free(p);
}

static void test_null_pre_tokenizer_gives_the_whole_input(void **state)
{
    (void)state;
    check(NULL, "a b", "a b@0-3");
}

static void test_long_words_beyond_the_default_jit_stack(void **state)
{
    (void)state;
    /* 60000 Devanagari syllables without a space: one piece */
    size_t reps = 60000, n = reps * 6;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < reps; i++)
        memcpy(s + 6 * i, "कि", 6);
    lipi_pretokenizer *p = named("indic");
    lipi_pieces out = {0};
    lipi_error err;
    assert_int_equal(lipi_pretokenize(p, s, n, &out, &err), LIPI_OK);
    assert_int_equal(out.count, 1);
    assert_int_equal(out.src[0].end, n);
    lipi_pretokenizer_free(p);
    /* a user pattern whose group loop overflows PCRE2's default 32 KiB JIT
     * stack gets a bigger one */
    for (size_t i = 0; i < 20000; i++)
        memcpy(s + 2 * i, "ab", 2);
    assert_int_equal(lipi_pretokenizer_new_pattern("(?:ab|cd)+", &p, &err), LIPI_OK);
    assert_int_equal(lipi_pretokenize(p, s, 40000, &out, &err), LIPI_OK);
    assert_int_equal(out.count, 1);
    assert_int_equal(out.src[0].end, 40000);
    lipi_pieces_free(&out);
    lipi_pretokenizer_free(p);
    free(s);
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

static void test_unknown_name_lists_the_known_ones(void **state)
{
    (void)state;
    lipi_pretokenizer *p = (lipi_pretokenizer *)1;
    lipi_error err;
    assert_int_equal(lipi_pretokenizer_new("nope", &p, &err), LIPI_EINVAL);
    assert_null(p);
    assert_non_null(strstr(err.msg, "\"nope\""));
    assert_non_null(strstr(err.msg, "indic"));
    assert_non_null(strstr(err.msg, "metaspace"));
}

static void test_bad_pattern_reports_pcre2_message_and_offset(void **state)
{
    (void)state;
    lipi_pretokenizer *p = NULL;
    lipi_error err;
    assert_int_equal(lipi_pretokenizer_new_pattern("ab(cd", &p, &err), LIPI_EREGEX);
    assert_null(p);
    assert_int_equal(err.offset, 5);
    assert_non_null(strstr(err.msg, "missing closing parenthesis"));
    assert_non_null(strstr(err.msg, "offset 5"));
    /* the offset is in the pattern as written, before \s is rewritten */
    assert_int_equal(lipi_pretokenizer_new_pattern("\\s\\s[a", &p, &err), LIPI_EREGEX);
    assert_int_equal(err.offset, 6);
}

static void test_invalid_utf8_is_rejected_with_its_offset(void **state)
{
    (void)state;
    lipi_pretokenizer *p = named("indic");
    lipi_pieces out = {0};
    lipi_error err;
    assert_int_equal(lipi_pretokenize(p, "ab\xe0\xa4", 4, &out, &err), LIPI_EFORMAT);
    assert_int_equal(err.offset, 2);
    assert_int_equal(out.count, 0);
    assert_int_equal(lipi_pretokenize(p, "a\xed\xa0\x80", 4, &out, &err), LIPI_EFORMAT);
    assert_int_equal(err.offset, 1);
    lipi_pieces_free(&out);
    lipi_pretokenizer_free(p);
}

static void expect_json_error(const char *json, lipi_status code, const char *msg_part)
{
    json_t *j = json_loads(json, 0, NULL);
    assert_non_null(j);
    lipi_pretokenizer *p = (lipi_pretokenizer *)1;
    lipi_error err;
    lipi_status st = lipi_pretokenizer_from_json(j, "pre_tokenizer", &p, &err);
    json_decref(j);
    if (st != code || !strstr(err.msg, msg_part))
        print_error("json: %s\n  want %s containing \"%s\"\n  got  %s \"%s\"\n", json,
                    lipi_status_name(code), msg_part, lipi_status_name(st), err.msg);
    assert_int_equal(st, code);
    assert_non_null(strstr(err.msg, msg_part));
    assert_null(p);
}

static void test_json_errors_name_the_path(void **state)
{
    (void)state;
    expect_json_error("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Whitespace\"},"
                      "{\"type\":\"Foo\"}]}",
                      LIPI_EFORMAT, "pre_tokenizer.pretokenizers[1].type: unknown type \"Foo\"");
    expect_json_error("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Sequence\","
                      "\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":1}]}]}",
                      LIPI_EFORMAT,
                      "pre_tokenizer.pretokenizers[0].pretokenizers[0].individual_digits: "
                      "expected true or false, found an integer");
    expect_json_error("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a(\"},\"behavior\":"
                      "\"Isolated\",\"invert\":false}",
                      LIPI_EREGEX, "pre_tokenizer.pattern.Regex: missing closing parenthesis");
    expect_json_error("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a(\"},\"behavior\":"
                      "\"Isolated\",\"invert\":false}",
                      LIPI_EREGEX, "at pattern offset 2");
    expect_json_error("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Iso\"}",
                      LIPI_EFORMAT, "pre_tokenizer.behavior: expected one of \"Removed\"");
    expect_json_error("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"}}", LIPI_EFORMAT,
                      "pre_tokenizer.behavior: missing");
    expect_json_error("{\"type\":\"Split\",\"pattern\":\"a\",\"behavior\":\"Isolated\"}",
                      LIPI_EFORMAT, "pre_tokenizer.pattern: expected {\"Regex\": ...}");
    expect_json_error("{\"type\":\"Metaspace\",\"replacement\":\"ab\"}", LIPI_EFORMAT,
                      "pre_tokenizer.replacement: expected a one-character string");
    expect_json_error("{\"type\":\"Metaspace\",\"replacement\":\"_\",\"add_prefix_space\":false,"
                      "\"prepend_scheme\":\"always\"}",
                      LIPI_EFORMAT, "pre_tokenizer.add_prefix_space: false does not match");
    expect_json_error("{\"type\":\"Metaspace\",\"prepend_scheme\":\"sometimes\"}", LIPI_EFORMAT,
                      "pre_tokenizer.prepend_scheme: expected one of \"always\", \"first\", "
                      "\"never\", found \"sometimes\"");
    expect_json_error("{\"type\":\"Sequence\"}", LIPI_EFORMAT, "pre_tokenizer.pretokenizers: missing");
    expect_json_error("{\"type\":\"Sequence\",\"pretokenizers\":[null]}", LIPI_EFORMAT,
                      "pre_tokenizer.pretokenizers[0]: expected an object, found null");
    expect_json_error("{\"pretokenizers\":[]}", LIPI_EFORMAT, "pre_tokenizer.type: missing");
    expect_json_error("[1]", LIPI_EFORMAT, "pre_tokenizer: expected an object, found an array");
    expect_json_error("{\"type\":\"FixedLength\",\"length\":0}", LIPI_EFORMAT,
                      "pre_tokenizer.length: expected a positive integer");
    expect_json_error("{\"type\":\"CharDelimiterSplit\"}", LIPI_EFORMAT,
                      "pre_tokenizer.delimiter: missing");
}

static void test_json_defaults_and_legacy_metaspace(void **state)
{
    (void)state;
    struct {
        const char *in, *out;
    } cases[] = {
        {"{\"type\":\"ByteLevel\"}",
         "{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true}"},
        {"{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"add_prefix_space\":true}",
         "{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"prepend_scheme\":\"always\",\"split\":true}"},
        {"{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"add_prefix_space\":false,\"str_rep\":\"▁\"}",
         "{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"prepend_scheme\":\"never\",\"split\":true}"},
        {"{\"type\":\"Punctuation\"}", "{\"type\":\"Punctuation\",\"behavior\":\"Isolated\"}"},
        {"{\"type\":\"Digits\"}", "{\"type\":\"Digits\",\"individual_digits\":false}"},
        {"{\"type\":\"FixedLength\"}", "{\"type\":\"FixedLength\",\"length\":5}"},
        {"{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Removed\"}",
         "{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Removed\",\"invert\":false}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        lipi_pretokenizer *p = from_json_text(cases[i].in);
        json_t *got = lipi_pretokenizer_to_json(p);
        json_t *want = json_loads(cases[i].out, 0, NULL);
        if (!json_equal(got, want)) {
            char *g = json_dumps(got, JSON_COMPACT);
            print_error("in: %s\n  want: %s\n  got:  %s\n", cases[i].in, cases[i].out, g);
            free(g);
        }
        assert_true(json_equal(got, want));
        json_decref(got);
        json_decref(want);
        lipi_pretokenizer_free(p);
    }
    /* json null is "no pre-tokenizer" */
    lipi_pretokenizer *p = (lipi_pretokenizer *)1;
    json_t *null = json_null();
    assert_int_equal(lipi_pretokenizer_from_json(null, "pre_tokenizer", &p, NULL), LIPI_OK);
    assert_null(p);
    json_t *j = lipi_pretokenizer_to_json(NULL);
    assert_true(json_is_null(j));
    json_decref(j);
}

/* ------------------------------------------------------------------------ */
/* Hugging Face reference outputs                                            */
/* ------------------------------------------------------------------------ */

static json_t *load_fixture(void)
{
    json_error_t je;
    json_t *root = json_load_file(HF_FIXTURE, 0, &je);
    if (!root)
        fail_msg("%s:%d: %s", HF_FIXTURE, je.line, je.text);
    return root;
}

static void test_named_pre_tokenizers_serialize_as_recorded(void **state)
{
    (void)state;
    json_t *root = load_fixture();
    json_t *named_arr = json_object_get(root, "named");
    assert_int_equal(json_array_size(named_arr), N_NAMES);
    size_t i;
    json_t *n;
    json_array_foreach(named_arr, i, n) {
        const char *name = json_string_value(json_object_get(n, "name"));
        lipi_pretokenizer *p = named(name);
        json_t *got = lipi_pretokenizer_to_json(p);
        if (!json_equal(got, json_object_get(n, "pre_tokenizer")))
            fail_msg("%s serializes differently from the fixture", name);
        json_decref(got);
        lipi_pretokenizer_free(p);
    }
    json_decref(root);
}

static void test_matches_hugging_face_on_every_recorded_case(void **state)
{
    (void)state;
    json_t *root = load_fixture();
    json_t *configs = json_object_get(root, "configs"), *cases = json_object_get(root, "cases");
    size_t nc = json_array_size(configs);
    assert_true(nc > 0);
    lipi_pretokenizer **pts = calloc(nc, sizeof *pts);
    for (size_t i = 0; i < nc; i++) {
        json_t *c = json_array_get(configs, i);
        lipi_error err;
        if (lipi_pretokenizer_from_json(c, "pre_tokenizer", &pts[i], &err) != LIPI_OK)
            fail_msg("config %zu: %s", i, err.msg);
        json_t *back = lipi_pretokenizer_to_json(pts[i]);
        if (!json_equal(back, c))
            fail_msg("config %zu does not round-trip through JSON", i);
        json_decref(back);
    }
    size_t failures = 0, checked = 0, ci;
    json_t *cs;
    lipi_pieces out = {0};
    json_array_foreach(cases, ci, cs) {
        size_t k = (size_t)json_integer_value(json_object_get(cs, "config"));
        json_t *in = json_object_get(cs, "input");
        json_t *want = json_object_get(cs, "pieces");
        lipi_error err;
        lipi_status st = lipi_pretokenize(pts[k], json_string_value(in), json_string_length(in),
                                          &out, &err);
        bool ok = st == LIPI_OK && out.count == json_array_size(want);
        for (size_t i = 0; ok && i < out.count; i++) {
            json_t *w = json_array_get(want, i);
            json_t *wt = json_array_get(w, 0);
            size_t len = out.text_off[i + 1] - out.text_off[i];
            ok = len == json_string_length(wt) &&
                 memcmp(out.text + out.text_off[i], json_string_value(wt), len) == 0 &&
                 out.src[i].start == (size_t)json_integer_value(json_array_get(w, 1)) &&
                 out.src[i].end == (size_t)json_integer_value(json_array_get(w, 2));
        }
        checked++;
        if (!ok && ++failures <= 5) {
            char *cfg = json_dumps(json_array_get(configs, k), JSON_COMPACT);
            char *w = json_dumps(want, JSON_COMPACT);
            char *g = st == LIPI_OK ? render(&out) : strdup(err.msg);
            print_error("config %zu %.200s\n  input: %s\n  want: %s\n  got:  %s\n", k, cfg,
                        json_string_value(in), w, g);
            free(cfg);
            free(w);
            free(g);
        }
    }
    lipi_pieces_free(&out);
    for (size_t i = 0; i < nc; i++)
        lipi_pretokenizer_free(pts[i]);
    free(pts);
    json_decref(root);
    if (failures)
        print_error("%zu of %zu cases differ from Hugging Face\n", failures, checked);
    assert_int_equal(failures, 0);
    assert_true(checked > 1000);
}

/* ------------------------------------------------------------------------ */
/* Properties on random mixed-script text                                    */
/* ------------------------------------------------------------------------ */

static uint64_t rng_state;
static uint32_t rng(void)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

static const char *const ATOMS[] = {
    "a", "Z", "e", "'s", "'", "7", "0", " ", " ", "  ", "\n", "\r\n", "\r", "\t", ",", "!", "-",
    "$", "_", "\xc2\xa0", "é", "e\xcc\x81", "क", "ि", "्", "ष", "ं", "़", "०", "।", "த", "ி",
    "்", "ব", "া", "ৎ", "👨", "\xe2\x80\x8d", "\xe2\x80\x8c", "👍", "🏽", "❤", "\xef\xb8\x8f",
    "你", "好", "の", "ー", "ع", "ب", "ไ", "ท", "α", "ж", "▁", "²", "\xe1\xa0\x8e", "\xc2\x85",
};

static size_t random_text(char *buf, size_t cap)
{
    size_t n = 0, atoms = rng() % 40;
    for (size_t i = 0; i < atoms; i++) {
        const char *a = ATOMS[rng() % (sizeof ATOMS / sizeof *ATOMS)];
        size_t l = strlen(a);
        if (n + l >= cap)
            break;
        memcpy(buf + n, a, l);
        n += l;
    }
    buf[n] = '\0';
    return n;
}

typedef struct {
    const char *json;  /* or NULL for a name */
    const char *name;
    bool covers;       /* keeps every input byte */
    bool same_text;    /* piece text is the source bytes */
} prop_case;

static void test_pieces_are_ordered_non_empty_and_cover_the_input(void **state)
{
    (void)state;
    const prop_case cases[] = {
        {NULL, "indic", true, true},
        {NULL, "cl100k", true, true},
        {NULL, "o200k", true, true},
        {NULL, "gpt2", true, true},
        {NULL, "bytelevel", true, false},
        {NULL, "bert", false, true},
        {NULL, "whitespace", false, true},
        {NULL, "metaspace", true, false},
        {NULL, "digits", true, true},
        {"{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":false}",
         NULL, true, false},
        {"{\"type\":\"WhitespaceSplit\"}", NULL, false, true},
        {"{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"prepend_scheme\":\"first\",\"split\":true}",
         NULL, true, false},
        {"{\"type\":\"Punctuation\",\"behavior\":\"MergedWithNext\"}", NULL, true, true},
        {"{\"type\":\"Punctuation\",\"behavior\":\"MergedWithPrevious\"}", NULL, true, true},
        {"{\"type\":\"Punctuation\",\"behavior\":\"Removed\"}", NULL, false, true},
        {"{\"type\":\"Digits\",\"individual_digits\":false}", NULL, true, true},
        {"{\"type\":\"UnicodeScripts\"}", NULL, false, true},
        {"{\"type\":\"CharDelimiterSplit\",\"delimiter\":\"-\"}", NULL, false, true},
        {"{\"type\":\"FixedLength\",\"length\":2}", NULL, true, true},
        {"{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},\"behavior\":\"Contiguous\","
         "\"invert\":true}",
         NULL, true, true},
        {"{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a*\"},\"behavior\":\"MergedWithNext\","
         "\"invert\":false}",
         NULL, true, true},
        {"{\"type\":\"Split\",\"pattern\":{\"String\":\"\"},\"behavior\":\"Isolated\","
         "\"invert\":false}",
         NULL, true, true},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Metaspace\",\"replacement\":\"▁\","
         "\"prepend_scheme\":\"always\",\"split\":true},{\"type\":\"ByteLevel\","
         "\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},"
         "{\"type\":\"Digits\",\"individual_digits\":true}]}",
         NULL, true, false},
    };
    char buf[512];
    lipi_pieces out = {0};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        lipi_pretokenizer *p = cases[c].json ? from_json_text(cases[c].json) : named(cases[c].name);
        rng_state = 20240601;
        for (int iter = 0; iter < 300; iter++) {
            size_t n = random_text(buf, sizeof buf);
            lipi_error err;
            if (lipi_pretokenize(p, buf, n, &out, &err) != LIPI_OK)
                fail_msg("case %zu: %s", c, err.msg);
            /* Text a pre-tokenizer inserts (a prefix space, a prepended
             * "▁") carries the span of the character it was put before, and
             * each byte-level character the span of its whole character, as
             * in Hugging Face: such pieces can share source bytes. */
            size_t pos = 0, prev_start = 0;
            for (size_t i = 0; i < out.count; i++) {
                lipi_span s = out.src[i];
                bool ok = out.text_off[i + 1] > out.text_off[i] && s.start < s.end && s.end <= n;
                if (cases[c].same_text)
                    ok = ok && s.start >= pos && (!cases[c].covers || s.start == pos) &&
                         out.text_off[i + 1] - out.text_off[i] == s.end - s.start &&
                         memcmp(out.text + out.text_off[i], buf + s.start, s.end - s.start) == 0;
                else /* a split of byte-level text can cut inside a character */
                    ok = ok && s.start >= prev_start && s.end >= pos &&
                         (!cases[c].covers || s.start <= pos);
                if (!ok) {
                    char *g = render(&out);
                    fail_msg("case %zu (%s) piece %zu on \"%s\": %s", c,
                             cases[c].name ? cases[c].name : cases[c].json, i, buf, g);
                }
                prev_start = s.start;
                pos = s.end;
            }
            if (cases[c].covers && pos != n)
                fail_msg("case %zu: pieces end at %zu of %zu on \"%s\"", c, pos, n, buf);
        }
        lipi_pretokenizer_free(p);
    }
    lipi_pieces_free(&out);
}

/* ------------------------------------------------------------------------ */
/* Allocation failures                                                       */
/* ------------------------------------------------------------------------ */

typedef struct {
    const char *name; /* built-in name, or NULL for json */
    const json_t *json;
    const char *text;
} pretok_job;

/* Builds a pre-tokenizer (by name or JSON), writes it back as JSON and
 * splits text with it twice (the second call reuses and may grow the
 * scratch). */
static lipi_status pretok_run(void *ctx, lipi_error *err)
{
    const pretok_job *j = ctx;
    lipi_pretokenizer *p = NULL;
    lipi_pieces out = {0};
    lipi_status st = j->name ? lipi_pretokenizer_new(j->name, &p, err)
                             : lipi_pretokenizer_from_json(j->json, "pre_tokenizer", &p, err);
    if (st == LIPI_OK) {
        json_t *back = lipi_pretokenizer_to_json(p);
        if (!back)
            st = lipi_error_set(err, LIPI_ENOMEM, NULL, 0, 0, "out of memory");
        json_decref(back);
    }
    if (st == LIPI_OK)
        st = lipi_pretokenize(p, j->text, strlen(j->text), &out, err);
    if (st == LIPI_OK)
        st = lipi_pretokenize(p, j->text, strlen(j->text), &out, err);
    lipi_pieces_free(&out);
    lipi_pretokenizer_free(p);
    return st;
}

static void alloc_failure_loop(const char *name, const char *json, const char *text)
{
    pretok_job j = {name, json ? json_loads(json, 0, NULL) : NULL, text};
    assert_true(name || j.json);
    assert_true(alloc_fail_loop(name ? name : json, pretok_run, &j) > 3);
    json_decref((json_t *)j.json);
}

static void test_allocation_failures_return_enomem_and_leak_nothing(void **state)
{
    (void)state;
    const char *text = "Hello हिन्दीEnglish  नमस्ते, 12345 👨‍👩‍👧\r\n";
    alloc_failure_loop("indic", NULL, text);
    alloc_failure_loop("bytelevel", NULL, text);
    alloc_failure_loop("metaspace", NULL, text);
    alloc_failure_loop("bert", NULL, text);
    alloc_failure_loop(NULL,
                       "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                       "{\"String\":\" \"},\"behavior\":\"MergedWithNext\",\"invert\":false},"
                       "{\"type\":\"Metaspace\",\"replacement\":\"▁\",\"prepend_scheme\":\"first\","
                       "\"split\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                       "\"trim_offsets\":true,\"use_regex\":true},{\"type\":\"UnicodeScripts\"}]}",
                       text);
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    const lipi_pretokenizer *p;
    const char *text;
    char *want;
    int mismatches;
} thread_arg;

static void *thread_main(void *v)
{
    thread_arg *a = v;
    lipi_pieces out = {0};
    for (int i = 0; i < 200; i++) {
        if (lipi_pretokenize(a->p, a->text, strlen(a->text), &out, NULL) != LIPI_OK) {
            a->mismatches++;
            continue;
        }
        char *g = render(&out);
        a->mismatches += strcmp(g, a->want) != 0;
        free(g);
    }
    lipi_pieces_free(&out);
    return NULL;
}

static void test_one_pre_tokenizer_shared_by_threads(void **state)
{
    (void)state;
    const char *text = "हिन्दीEnglish நீ বাংলা 12345 👨‍👩‍👧 it's\r\nok";
    lipi_pretokenizer *p = named("indic");
    lipi_pieces out = {0};
    assert_int_equal(lipi_pretokenize(p, text, strlen(text), &out, NULL), LIPI_OK);
    char *want = render(&out);
    lipi_pieces_free(&out);
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){p, text, want, 0};
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].mismatches, 0);
    }
    free(want);
    lipi_pretokenizer_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_indic_keeps_letters_with_their_marks),
        cmocka_unit_test(test_cl100k_splits_hindi_at_vowel_signs_and_indic_does_not),
        cmocka_unit_test(test_indic_splits_where_the_script_changes),
        cmocka_unit_test(test_indic_keeps_one_leading_space_with_the_word),
        cmocka_unit_test(test_english_in_every_named_pre_tokenizer),
        cmocka_unit_test(test_hindi_in_every_named_pre_tokenizer),
        cmocka_unit_test(test_tamil_and_bengali_in_every_named_pre_tokenizer),
        cmocka_unit_test(test_mixed_script_in_every_named_pre_tokenizer),
        cmocka_unit_test(test_emoji_zwj_sequence_in_every_named_pre_tokenizer),
        cmocka_unit_test(test_digits_in_every_named_pre_tokenizer),
        cmocka_unit_test(test_newlines_and_crlf),
        cmocka_unit_test(test_empty_input_gives_no_pieces),
        cmocka_unit_test(test_bytelevel_maps_bytes_and_keeps_source_offsets),
        cmocka_unit_test(test_metaspace_prepends_and_splits),
        cmocka_unit_test(test_split_behaviors_and_invert),
        cmocka_unit_test(test_split_string_pattern_is_literal),
        cmocka_unit_test(test_punctuation_and_digits),
        cmocka_unit_test(test_bert_pre_tokenizer),
        cmocka_unit_test(test_whitespace_and_whitespace_split),
        cmocka_unit_test(test_unicode_scripts_and_other_kinds),
        cmocka_unit_test(test_sequence_keeps_offsets_through_byte_level),
        cmocka_unit_test(test_new_pattern_is_an_isolated_regex_split),
        cmocka_unit_test(test_patterns_take_oniguruma_meaning_of_s_w_h),
        cmocka_unit_test(test_null_pre_tokenizer_gives_the_whole_input),
        cmocka_unit_test(test_long_words_beyond_the_default_jit_stack),
        cmocka_unit_test(test_unknown_name_lists_the_known_ones),
        cmocka_unit_test(test_bad_pattern_reports_pcre2_message_and_offset),
        cmocka_unit_test(test_invalid_utf8_is_rejected_with_its_offset),
        cmocka_unit_test(test_json_errors_name_the_path),
        cmocka_unit_test(test_json_defaults_and_legacy_metaspace),
        cmocka_unit_test(test_named_pre_tokenizers_serialize_as_recorded),
        cmocka_unit_test(test_matches_hugging_face_on_every_recorded_case),
        cmocka_unit_test(test_pieces_are_ordered_non_empty_and_cover_the_input),
        cmocka_unit_test(test_allocation_failures_return_enomem_and_leak_nothing),
        cmocka_unit_test(test_one_pre_tokenizer_shared_by_threads),
    };
    return cmocka_run_group_tests_name("pretokenize", tests, NULL, NULL);
}
