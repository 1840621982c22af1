// Drives the official @google/genai SDK against a base URL (the gateway):
// node genai_sdk.mjs BASE_URL API_KEY MODEL CALL... where each CALL is
// "generate" (models.generateContent) or "stream"
// (models.generateContentStream, read to its end). Prints one JSON object:
// {CALL: {text, usage}} or {CALL: {error, status}} per call.
import { GoogleGenAI } from "@google/genai";

const [baseUrl, apiKey, model, ...calls] = process.argv.slice(2);
// The SDK (3.x) calls /v1 unless told: the gateway serves Gemini on /v1beta.
const ai = new GoogleGenAI({ apiKey, httpOptions: { baseUrl, apiVersion: "v1beta" } });
const results = {};
for (const call of calls) {
  try {
    if (call === "generate") {
      const answer = await ai.models.generateContent({ model, contents: "say hi" });
      results[call] = { text: answer.text, usage: answer.usageMetadata };
    } else if (call === "stream") {
      const stream = await ai.models.generateContentStream({ model, contents: "say hi" });
      let text = "";
      let usage = null;
      for await (const chunk of stream) {
        text += chunk.text ?? "";
        usage = chunk.usageMetadata ?? usage;
      }
      results[call] = { text, usage };
    } else {
      throw new Error("unknown call " + call);
    }
  } catch (error) {
    results[call] = { error: String(error?.message ?? error), status: error?.status ?? null };
  }
}
console.log(JSON.stringify(results));
