/* The text estimator: a token count for any UTF-8 text without a
 * vocabulary, meant to land at or a little above what the o200k_base
 * tokenizer gives. It follows that tokenizer's first step (splitting text
 * into words, digit groups of three, punctuation runs and white space) and
 * charges each piece by its class of characters; the costs were fitted on
 * the corpus in bench/gateway_estimate/ (method and figures in
 * docs/gateway-estimate.md). Costs are in thousandths of a token and only
 * ever added (a lead refund is always smaller than what the next piece
 * adds), so appending text never lowers the count. */
#include <assert.h>

#include "gw_estimate.h"

/* Costs in thousandths of a token. */
enum {
    COST_TOKEN = 1000,
    COST_WORD = 1030,            /* a word of Latin letters */
    COST_WORD_OTHER = 1100,      /* a word starting with another alphabet */
    COST_MEDIUM_LETTER = 25,     /* each ASCII letter from the 4th to the 6th of a word */
    COST_LONG_LETTER = 175,      /* ... from the 7th to the 12th */
    COST_VERY_LONG_LETTER = 150, /* ... from the 13th on */
    COST_CAPITAL = 60,           /* each upper-case ASCII letter but the first of a word */
    COST_CONSONANT = 875,        /* each ASCII consonant past the second in a row */
    COST_ACCENTED_WORD = 225,    /* each letter of a word that has an accented letter */
    COST_LATIN1 = 600,           /* an accented letter of Latin-1 (é, ü, ñ, å) */
    COST_LATIN_EXTENDED = 1000,  /* of Latin Extended (ř, ł, ş, ı, ạ) */
    COST_CYRILLIC = 120,
    COST_SEMITIC = 170,      /* Hebrew, Arabic, Syriac, Thaana */
    COST_INDIC = 100,        /* Devanagari to Sinhala */
    COST_SOUTHEAST = 400,    /* Thai, Lao, Tibetan: no spaces between words */
    COST_OTHER_LETTER = 260, /* Greek, Armenian, Georgian, Ethiopic, ... */
    COST_CJK = 1000,         /* Han, kana, Hangul: one per character */
    COST_SPACE_CHAR = 10,    /* each white space character past the first of a run */
    COST_PUNCT_LONG = 30,    /* each ASCII punctuation character past PUNCT_SHORT_RUN */
    COST_SYMBOL = 1000,      /* a non-ASCII symbol or punctuation character */
    COST_EMOJI = 2000,
    COST_JOINER = 700, /* zero-width joiner, variation selector, tag */
};

#define WORD_FREE_LETTERS 3
#define WORD_MEDIUM_LETTERS 6
#define WORD_LONG_LETTERS 12
#define PUNCT_SHORT_RUN 4
#define CONSONANTS_FREE 2

enum piece {
    PIECE_NONE = 0,
    PIECE_WORD,
    PIECE_DIGITS,
    PIECE_SPACE,
    PIECE_NEWLINE,
    PIECE_PUNCT,
    PIECE_PUNCT_TAIL, /* line ends right after punctuation belong to it */
};

enum char_class {
    CLASS_NONE = 0,
    CLASS_LOWER, /* ASCII letters */
    CLASS_UPPER,
    CLASS_LATIN1,
    CLASS_LATIN_EXTENDED,
    CLASS_CYRILLIC,
    CLASS_SEMITIC,
    CLASS_INDIC,
    CLASS_SOUTHEAST,
    CLASS_OTHER_LETTER,
    CLASS_CJK,
    CLASS_DIGIT,
    CLASS_SPACE,
    CLASS_NEWLINE,
    CLASS_PUNCT, /* ASCII punctuation and control characters */
    CLASS_SYMBOL,
    CLASS_EMOJI,
    CLASS_JOINER,
    CLASS_INVALID, /* private use, unassigned planes, bytes that are not UTF-8 */
};

enum {
    FLAG_LEADABLE = 1,    /* the open punctuation run can join a following word */
    FLAG_BLANK_SPACE = 2, /* the open white space run starts with ' ' */
    FLAG_ACCENTED = 4,    /* the open word has an accented Latin letter */
};

static enum char_class ascii_class(uint32_t c)
{
    if (c >= 'a' && c <= 'z')
        return CLASS_LOWER;
    if (c >= 'A' && c <= 'Z')
        return CLASS_UPPER;
    if (c >= '0' && c <= '9')
        return CLASS_DIGIT;
    if (c == ' ' || c == '\t' || c == '\v' || c == '\f')
        return CLASS_SPACE;
    if (c == '\n' || c == '\r')
        return CLASS_NEWLINE;
    return CLASS_PUNCT;
}

/* Below U+3000: the alphabets, general punctuation and symbols. */
static enum char_class low_class(uint32_t c)
{
    if (c < 0xC0 || c == 0xD7 || c == 0xF7)
        return CLASS_SYMBOL;
    if (c < 0x100)
        return CLASS_LATIN1;
    if (c < 0x250)
        return CLASS_LATIN_EXTENDED;
    if (c < 0x370)
        return CLASS_LATIN1; /* IPA, modifier letters, combining marks */
    if (c >= 0x400 && c < 0x530)
        return CLASS_CYRILLIC;
    if (c >= 0x590 && c < 0x800)
        return CLASS_SEMITIC;
    if (c >= 0x900 && c < 0xE00)
        return CLASS_INDIC;
    if (c >= 0xE00 && c < 0x1000)
        return CLASS_SOUTHEAST;
    if (c >= 0x1100 && c < 0x1200)
        return CLASS_CJK; /* Hangul Jamo */
    if (c >= 0x1E00 && c < 0x1F00)
        return CLASS_LATIN_EXTENDED; /* Vietnamese */
    if (c < 0x2000)
        return CLASS_OTHER_LETTER;
    if (c == 0x200D)
        return CLASS_JOINER;
    if (c >= 0x2C00 && c < 0x2E00)
        return CLASS_OTHER_LETTER;
    if (c >= 0x2E80)
        return CLASS_CJK; /* radicals */
    return CLASS_SYMBOL;
}

static enum char_class code_point_class(uint32_t c)
{
    if (c < 0x80)
        return ascii_class(c);
    if (c < 0x3000)
        return low_class(c);
    if (c < 0x3040)
        return CLASS_SYMBOL; /* CJK punctuation */
    if (c < 0xA4D0)
        return CLASS_CJK;
    if (c < 0xAC00)
        return CLASS_OTHER_LETTER;
    if (c < 0xD7B0)
        return CLASS_CJK; /* Hangul syllables */
    if (c < 0xF900)
        return CLASS_INVALID; /* surrogates, private use */
    if (c < 0xFB00)
        return CLASS_CJK;
    if (c < 0xFE00)
        return CLASS_OTHER_LETTER; /* presentation forms */
    if (c < 0xFE10)
        return CLASS_JOINER; /* variation selectors */
    if (c >= 0xFF66 && c < 0xFFA0)
        return CLASS_CJK; /* halfwidth katakana */
    if (c < 0x10000)
        return CLASS_SYMBOL; /* fullwidth forms, specials */
    if (c >= 0x1F000 && c < 0x1FB00)
        return CLASS_EMOJI;
    if (c >= 0x20000 && c < 0x40000)
        return CLASS_CJK;
    if (c >= 0xE0000 && c < 0xE0080)
        return CLASS_JOINER; /* tags of flag sequences */
    return CLASS_INVALID;
}

static bool is_letter(enum char_class class)
{
    return class >= CLASS_LOWER && class <= CLASS_CJK;
}

static bool is_vowel(uint32_t c)
{
    c |= 0x20; /* ASCII letters only: lower case */
    return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || c == 'y';
}

void gw_text_counter_init(struct gw_text_counter *counter)
{
    *counter = (struct gw_text_counter){0};
}

static void piece_close(struct gw_text_counter *counter)
{
    counter->closed_milli += counter->open_milli;
    counter->open_milli = 0;
}

static void piece_start(struct gw_text_counter *counter, enum piece piece, uint64_t cost_milli)
{
    piece_close(counter);
    counter->piece = (uint8_t)piece;
    counter->run = 1;
    counter->open_milli = cost_milli;
    counter->flags = 0;
}

/* A single space, or a single punctuation character after a word or digits,
 * becomes the first character of the word that follows (as in the
 * tokenizer): its own piece's cost is taken back. The word adds at least
 * COST_TOKEN, as much as is taken back. */
static void lead_absorb(struct gw_text_counter *counter)
{
    if (counter->piece == PIECE_SPACE && counter->run == 1) {
        assert(counter->open_milli == COST_TOKEN);
        counter->open_milli = 0;
    } else if (counter->piece == PIECE_PUNCT && counter->run == 1 &&
               (counter->flags & FLAG_LEADABLE)) {
        assert(counter->open_milli == COST_TOKEN);
        counter->open_milli = 0;
    }
}

static uint64_t word_start_cost(enum char_class class)
{
    if (class == CLASS_CJK)
        return 0; /* each character costs a whole token */
    if (class == CLASS_LOWER || class == CLASS_UPPER || class == CLASS_LATIN1 ||
        class == CLASS_LATIN_EXTENDED)
        return COST_WORD;
    return COST_WORD_OTHER;
}

/* counter->run already counts this letter. Long words, capitals inside a
 * word, consonant clusters and accents mark words a vocabulary built mostly
 * from English lacks: they take more tokens. */
static uint64_t ascii_letter_cost(struct gw_text_counter *counter, uint32_t c, bool upper)
{
    uint32_t n = counter->run;
    uint64_t cost = n <= WORD_FREE_LETTERS     ? 0
                    : n <= WORD_MEDIUM_LETTERS ? COST_MEDIUM_LETTER
                    : n <= WORD_LONG_LETTERS   ? COST_LONG_LETTER
                                               : COST_VERY_LONG_LETTER;
    if (upper && n > 1)
        cost += COST_CAPITAL;
    if (counter->flags & FLAG_ACCENTED)
        cost += COST_ACCENTED_WORD;
    if (is_vowel(c)) {
        counter->consonants = 0;
    } else {
        if (counter->consonants < UINT8_MAX)
            counter->consonants++;
        if (counter->consonants > CONSONANTS_FREE)
            cost += COST_CONSONANT;
    }
    return cost;
}

/* The first accented letter of a word charges the letters before it too. */
static uint64_t accent_cost(struct gw_text_counter *counter)
{
    if (counter->flags & FLAG_ACCENTED)
        return 0;
    counter->flags |= FLAG_ACCENTED;
    return (uint64_t)(counter->run - 1) * COST_ACCENTED_WORD;
}

static uint64_t letter_cost(struct gw_text_counter *counter, enum char_class class, uint32_t c)
{
    if (class == CLASS_LOWER || class == CLASS_UPPER)
        return ascii_letter_cost(counter, c, class == CLASS_UPPER);
    counter->consonants = 0;
    switch (class) {
    case CLASS_LATIN1:
        return COST_LATIN1 + accent_cost(counter);
    case CLASS_LATIN_EXTENDED:
        return COST_LATIN_EXTENDED + accent_cost(counter);
    case CLASS_CYRILLIC:
        return COST_CYRILLIC;
    case CLASS_SEMITIC:
        return COST_SEMITIC;
    case CLASS_INDIC:
        return COST_INDIC;
    case CLASS_SOUTHEAST:
        return COST_SOUTHEAST;
    case CLASS_CJK:
        return COST_CJK;
    default:
        assert(class == CLASS_OTHER_LETTER);
        return COST_OTHER_LETTER;
    }
}

static void add_letter(struct gw_text_counter *counter, enum char_class class, uint32_t c)
{
    /* A new word starts unless this continues one; an upper-case letter
     * after a lower-case one starts a new word too (camelCase). */
    bool continues =
        counter->piece == PIECE_WORD && !(counter->previous == CLASS_LOWER && class == CLASS_UPPER);
    if (!continues) {
        lead_absorb(counter);
        piece_start(counter, PIECE_WORD, word_start_cost(class));
        counter->run = 0;
        counter->consonants = 0;
    }
    if (counter->run < UINT32_MAX)
        counter->run++;
    counter->open_milli += letter_cost(counter, class, c);
}

static void add_digit(struct gw_text_counter *counter)
{
    if (counter->piece == PIECE_DIGITS && counter->run % 3 != 0)
        counter->run++;
    else
        piece_start(counter, PIECE_DIGITS, COST_TOKEN); /* digits go in groups of three */
}

static void add_space(struct gw_text_counter *counter, uint32_t c)
{
    if (counter->piece == PIECE_SPACE) {
        if (counter->run < UINT32_MAX)
            counter->run++;
        counter->open_milli += COST_SPACE_CHAR;
        return;
    }
    piece_start(counter, PIECE_SPACE, COST_TOKEN);
    if (c == ' ')
        counter->flags |= FLAG_BLANK_SPACE;
}

static void add_newline(struct gw_text_counter *counter)
{
    switch (counter->piece) {
    case PIECE_NEWLINE:
    case PIECE_PUNCT_TAIL:
        counter->open_milli += COST_SPACE_CHAR;
        return;
    case PIECE_PUNCT:
        counter->piece = PIECE_PUNCT_TAIL;
        counter->open_milli += COST_SPACE_CHAR;
        return;
    case PIECE_SPACE:
        /* White space before a line end is part of it: its first
         * character's cost goes, the line end adds as much. */
        assert(counter->open_milli >= COST_TOKEN);
        counter->open_milli -= COST_TOKEN;
        break;
    default:
        break;
    }
    piece_start(counter, PIECE_NEWLINE, COST_TOKEN);
}

static uint64_t symbol_cost(enum char_class class)
{
    switch (class) {
    case CLASS_PUNCT:
        return 0;
    case CLASS_EMOJI:
        return COST_EMOJI;
    case CLASS_JOINER:
        return COST_JOINER;
    default:
        assert(class == CLASS_SYMBOL || class == CLASS_INVALID);
        return COST_SYMBOL;
    }
}

static void add_punct(struct gw_text_counter *counter, enum char_class class)
{
    uint64_t cost = symbol_cost(class);
    if (counter->piece == PIECE_PUNCT) {
        if (counter->run < UINT32_MAX)
            counter->run++;
        if (class == CLASS_PUNCT)
            counter->open_milli += counter->run > PUNCT_SHORT_RUN ? COST_PUNCT_LONG : 0;
        else
            counter->open_milli += cost;
        counter->flags &= (uint8_t)~FLAG_LEADABLE;
        return;
    }
    bool after_text = counter->piece == PIECE_NONE || counter->piece == PIECE_WORD ||
                      counter->piece == PIECE_DIGITS;
    if (counter->piece == PIECE_SPACE && counter->run == 1 && (counter->flags & FLAG_BLANK_SPACE)) {
        assert(counter->open_milli == COST_TOKEN);
        counter->open_milli = 0; /* " (" is one piece */
    }
    piece_start(counter, PIECE_PUNCT, cost > COST_TOKEN ? cost : COST_TOKEN);
    if (after_text && cost <= COST_TOKEN)
        counter->flags |= FLAG_LEADABLE;
}

static void add_code_point(struct gw_text_counter *counter, enum char_class class, uint32_t c)
{
    if (is_letter(class))
        add_letter(counter, class, c);
    else if (class == CLASS_DIGIT)
        add_digit(counter);
    else if (class == CLASS_SPACE)
        add_space(counter, c);
    else if (class == CLASS_NEWLINE)
        add_newline(counter);
    else
        add_punct(counter, class);
    counter->previous = (uint8_t) class;
}

/* Sequence length announced by a lead byte, 0 for a byte that cannot start one. */
static uint8_t utf8_sequence_length(uint8_t byte)
{
    if (byte < 0x80)
        return 1;
    if (byte >= 0xC2 && byte <= 0xDF)
        return 2;
    if (byte >= 0xE0 && byte <= 0xEF)
        return 3;
    if (byte >= 0xF0 && byte <= 0xF4)
        return 4;
    return 0;
}

static uint32_t utf8_decode(const uint8_t *bytes, uint8_t length)
{
    static const uint8_t lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t c = bytes[0] & lead_mask[length];
    for (uint8_t i = 1; i < length; i++)
        c = (c << 6) | (bytes[i] & 0x3Fu);
    return c;
}

/* A byte that breaks a sequence: what was gathered counts as bytes that
 * are not UTF-8, one symbol each (the tokenizer falls back to bytes). */
static void utf8_flush_invalid(struct gw_text_counter *counter)
{
    for (uint8_t i = 0; i < counter->utf8_length; i++)
        add_code_point(counter, CLASS_INVALID, 0);
    counter->utf8_length = 0;
    counter->utf8_expected = 0;
}

static void add_byte(struct gw_text_counter *counter, uint8_t byte)
{
    if (counter->utf8_expected > 0) {
        if ((byte & 0xC0) == 0x80) {
            counter->utf8[counter->utf8_length++] = byte;
            if (counter->utf8_length == counter->utf8_expected) {
                uint32_t c = utf8_decode(counter->utf8, counter->utf8_length);
                counter->utf8_length = 0;
                counter->utf8_expected = 0;
                add_code_point(counter, code_point_class(c), c);
            }
            return;
        }
        utf8_flush_invalid(counter);
    }
    uint8_t length = utf8_sequence_length(byte);
    if (length == 1) {
        add_code_point(counter, ascii_class(byte), byte);
    } else if (length == 0) {
        add_code_point(counter, CLASS_INVALID, 0);
    } else {
        counter->utf8[0] = byte;
        counter->utf8_length = 1;
        counter->utf8_expected = length;
    }
}

void gw_text_counter_add(struct gw_text_counter *counter, const char *text, size_t length)
{
    assert(text != NULL || length == 0);
    const uint8_t *bytes = (const uint8_t *)text;
    for (size_t i = 0; i < length; i++) {
        /* Plain lower-case ASCII inside a word is most text: no decoding. */
        uint8_t byte = bytes[i];
        if (counter->utf8_expected == 0 && byte >= 'a' && byte <= 'z' &&
            counter->piece == PIECE_WORD) {
            if (counter->run < UINT32_MAX)
                counter->run++;
            counter->open_milli += ascii_letter_cost(counter, byte, false);
            counter->previous = CLASS_LOWER;
            continue;
        }
        add_byte(counter, byte);
    }
}

void gw_text_counter_break(struct gw_text_counter *counter)
{
    utf8_flush_invalid(counter);
    piece_close(counter);
    counter->piece = PIECE_NONE;
    counter->previous = CLASS_NONE;
    counter->run = 0;
    counter->flags = 0;
}

uint64_t gw_text_counter_tokens(const struct gw_text_counter *counter)
{
    /* An unfinished UTF-8 sequence counts nothing yet: it may still become
     * a letter that costs less than a byte would. */
    uint64_t milli = counter->closed_milli + counter->open_milli;
    return milli / COST_TOKEN + (milli % COST_TOKEN != 0);
}

uint64_t gw_estimate_text(const char *text, size_t length)
{
    struct gw_text_counter counter;
    gw_text_counter_init(&counter);
    gw_text_counter_add(&counter, text, length);
    return gw_text_counter_tokens(&counter);
}
