/**
 * A small SentencePiece-style ("llama") vocabulary that llama.cpp tokenizes for real: control tokens
 * for BOS/EOS and a ChatML template, 256 byte-fallback tokens so any UTF-8 text round-trips, single
 * ASCII characters, and every prefix of a list of common words (SPM merges pairs only into pieces
 * that exist, so a word is reachable only through its prefixes). A model may add tokens of its own
 * at the end (the tool-call markers), so every other token keeps its id.
 */

/** llama.cpp's `llama_token_type`. */
const TokenType = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, BYTE: 6 } as const;

/**
 * The tool-call markers of the `tools` template, one token each as in Qwen2.5's vocabulary
 * (user-defined: llama.cpp always matches them whole in text, and prints them as text).
 */
export const TOOL_CALL_TOKENS = ["<tool_call>", "</tool_call>"] as const;

const WORDS = `the be to of and a in that have it for not on with he as you do at this but his by from they we say her
she or an will my one all would there their what so up out if about who get which go me when make can like time no just
him know take people into year your good some could them see other than then now look only come its over think also back
after use two how our work first well way even new want because any these give day most us is are was were been has had
did does said hello world mesh model node peer token server request response stream chat message user assistant system
question answer yes please thank thanks sorry why where here small large fast slow test data file load run start stop
model models llama quick brown fox jumps lazy dog water fire earth air light dark red green blue black white number
one two three four five six seven eight nine ten hundred thousand machine learning network computer memory graph`
  .split(/\s+/)
  .filter(Boolean);

export interface Vocab {
  tokens: string[];
  scores: number[];
  types: number[];
  bos: number;
  eos: number;
  unk: number;
  imStart: number;
  imEnd: number;
}

/** The vocabulary, with `extra` user-defined tokens after every other one. */
export function buildVocab(extra: readonly string[] = []): Vocab {
  const tokens: string[] = [];
  const scores: number[] = [];
  const types: number[] = [];
  const seen = new Set<string>();
  const add = (text: string, type: number, score: number): number => {
    seen.add(text);
    tokens.push(text);
    scores.push(score);
    types.push(type);
    return tokens.length - 1;
  };
  const unk = add("<unk>", TokenType.UNKNOWN, 0);
  const bos = add("<s>", TokenType.CONTROL, 0);
  const eos = add("</s>", TokenType.CONTROL, 0);
  const imStart = add("<|im_start|>", TokenType.CONTROL, 0);
  const imEnd = add("<|im_end|>", TokenType.CONTROL, 0);
  for (let b = 0; b < 256; b++) add(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`, TokenType.BYTE, 0);
  add("\u2581", TokenType.NORMAL, -1);
  for (let c = 0x21; c < 0x7f; c++) add(String.fromCharCode(c), TokenType.NORMAL, -1);
  for (const word of WORDS) {
    const piece = `\u2581${word}`;
    // Longer pieces score higher so merges build whole words before anything else.
    for (let end = 2; end <= piece.length; end++) {
      const prefix = piece.slice(0, end);
      if (!seen.has(prefix)) add(prefix, TokenType.NORMAL, end);
    }
  }
  for (const text of extra) {
    if (seen.has(text)) throw new Error(`token ${JSON.stringify(text)} is in the vocabulary already`);
    add(text, TokenType.USER_DEFINED, 0);
  }
  return { tokens, scores, types, bos, eos, unk, imStart, imEnd };
}
