package dev.edgexsent.demo

import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import android.app.Activity
import android.os.Bundle
import android.os.SystemClock
import android.widget.Button
import android.widget.EditText
import android.widget.LinearLayout
import android.widget.TextView
import com.google.gson.JsonParser
import dev.edgexsent.UnigramTokenizer
import dev.edgexsent.Vectors
import java.nio.LongBuffer

/** Two sentences in, their cosine similarity and embedding time out; all on the device. */
class MainActivity : Activity() {
    private lateinit var env: OrtEnvironment
    private lateinit var session: OrtSession
    private lateinit var tokenizer: UnigramTokenizer
    private var maxLen = 64

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        env = OrtEnvironment.getEnvironment()
        session = env.createSession(assets.open("model_int8.onnx").readBytes(), OrtSession.SessionOptions())
        val rules = if (assets.list("")!!.contains("tokenizer_rules.json"))  // a student of e5-small reads by e5's rules
            JsonParser.parseString(assets.open("tokenizer_rules.json").reader().readText()).asJsonObject else null
        tokenizer = UnigramTokenizer(JsonParser.parseString(assets.open("tokenizer.json").reader().readText()).asJsonObject, rules)
        maxLen = JsonParser.parseString(assets.open("config.json").reader().readText())
            .asJsonObject.getAsJsonObject("model").get("max_len").asInt

        val a = EditText(this).apply { setText("Save the current document") }
        val b = EditText(this).apply { setText("Enregistrer le document actuel") }
        val result = TextView(this).apply { textSize = 22f }
        val button = Button(this).apply {
            text = "Compare"
            setOnClickListener {
                val t0 = SystemClock.elapsedRealtimeNanos()
                val va = embed(a.text.toString())
                val vb = embed(b.text.toString())
                val ms = (SystemClock.elapsedRealtimeNanos() - t0) / 2e6
                result.text = "cosine %.3f  (%.1f ms per sentence)".format(Vectors.cosine(va, vb), ms)
            }
        }
        setContentView(LinearLayout(this).apply {
            orientation = LinearLayout.VERTICAL
            setPadding(32, 32, 32, 32)
            listOf(a, b, button, result).forEach { addView(it) }
        })
    }

    /** Token ids -> int8 ONNX model (mean pooling inside) -> unit vector. */
    private fun embed(text: String): FloatArray {
        val ids = tokenizer.encode(text, maxLen).map { it.toLong() }.toLongArray()
        if (ids.isEmpty()) return FloatArray(0)
        val shape = longArrayOf(1, ids.size.toLong())
        OnnxTensor.createTensor(env, LongBuffer.wrap(ids), shape).use { idT ->
            OnnxTensor.createTensor(env, LongBuffer.wrap(LongArray(ids.size) { 1L }), shape).use { maskT ->
                session.run(mapOf("input_ids" to idT, "attention_mask" to maskT), setOf("sentence_embedding")).use { out ->
                    @Suppress("UNCHECKED_CAST")
                    val v = (out[0].value as Array<FloatArray>)[0]
                    return Vectors.l2Normalize(v)
                }
            }
        }
    }
}
