"""The deterministic language identifier that replaces langdetect."""

from __future__ import annotations

import pytest

from mmverify.verifiers.text import SUPPORTED_LANGUAGES, build_checker, detect_language

SENTENCES = {
    "en": ["I think we should go home now because it is late.",
           "Climate change is one of the most pressing issues of our time.",
           "Photosynthesis converts sunlight into chemical energy."],
    "de": ["Ich glaube, dass wir jetzt nach Hause gehen sollten.", "Die Katze schläft auf dem Sofa.",
           "Wir haben gestern einen langen Spaziergang im Wald gemacht."],
    "fr": ["Je pense que nous devrions rentrer à la maison maintenant.",
           "La vie est belle quand on est entouré de ses amis.", "Nous avons mangé une délicieuse soupe hier soir."],
    "es": ["Creo que deberíamos volver a casa ahora porque es tarde.", "Mi hermana trabaja en un hospital grande.",
           "Los niños juegan en el parque todos los días."],
    "it": ["Penso che dovremmo tornare a casa adesso perché è tardi.", "Mia sorella lavora in un grande ospedale.",
           "I bambini giocano nel parco ogni giorno."],
    "pt": ["Acho que devemos voltar para casa agora porque é tarde.", "Minha irmã trabalha em um grande hospital.",
           "As crianças brincam no parque todos os dias."],
    "zh": ["我认为我们现在应该回家了，因为已经很晚了。", "北京是中国的首都。"],
    "ja": ["もう遅いので、今すぐ家に帰るべきだと思います。", "東京は日本の首都です。"],
    "ko": ["늦었으니 이제 집에 가야 할 것 같아요.", "서울은 한국의 수도입니다."],
    "ru": ["Я думаю, что нам пора идти домой, потому что уже поздно.", "Москва является столицей России."],
    "ar": ["أعتقد أنه يجب علينا العودة إلى المنزل الآن لأن الوقت متأخر.", "القاهرة هي عاصمة مصر."],
    # beyond the required set: other scripts and Latin-script languages IFEval asks for
    "uk": ["Я думаю, що нам час іти додому."],
    "bg": ["Мисля, че трябва да се прибираме вкъщи, защото е късно."],
    "fa": ["فکر می‌کنم باید الان به خانه برگردیم چون دیر است."],
    "ur": ["میرا خیال ہے کہ ہمیں اب گھر جانا چاہیے کیونکہ دیر ہو گئی ہے۔"],
    "hi": ["मुझे लगता है कि हमें अब घर जाना चाहिए क्योंकि देर हो गई है।"],
    "mr": ["मला वाटते की आपण आता घरी जायला हवे कारण उशीर झाला आहे."],
    "ne": ["मलाई लाग्छ हामी अब घर जानुपर्छ किनभने ढिलो भइसकेको छ।"],
    "pl": ["Myślę, że powinniśmy już wrócić do domu."],
    "fi": ["Minä luulen, että meidän pitäisi mennä kotiin nyt."],
    "vi": ["Tôi nghĩ chúng ta nên về nhà bây giờ."],
    "sw": ["Nadhani tunapaswa kwenda nyumbani sasa kwa sababu ni usiku."],
    "nl": ["Ik denk dat we nu naar huis moeten gaan."],
    "tr": ["Bence şimdi eve gitmeliyiz çünkü geç oldu."],
    "el": ["Νομίζω ότι πρέπει να πάμε σπίτι τώρα."],
    "he": ["אני חושב שאנחנו צריכים ללכת הביתה עכשיו."],
    "th": ["ฉันคิดว่าเราควรกลับบ้านตอนนี้"],
    "bn": ["আমি মনে করি আমাদের এখন বাড়ি যাওয়া উচিত।"],
    "ta": ["நாம் இப்போது வீட்டிற்கு செல்ல வேண்டும் என்று நினைக்கிறேன்."],
    "te": ["మనం ఇప్పుడు ఇంటికి వెళ్లాలి అని నేను అనుకుంటున్నాను."],
    "kn": ["ನಾವು ಈಗ ಮನೆಗೆ ಹೋಗಬೇಕು ಎಂದು ನಾನು ಭಾವಿಸುತ್ತೇನೆ."],
    "ml": ["നമ്മൾ ഇപ്പോൾ വീട്ടിലേക്ക് പോകണമെന്ന് ഞാൻ കരുതുന്നു."],
    "gu": ["મને લાગે છે કે આપણે હવે ઘરે જવું જોઈએ."],
    "pa": ["ਮੈਨੂੰ ਲੱਗਦਾ ਹੈ ਕਿ ਸਾਨੂੰ ਹੁਣ ਘਰ ਜਾਣਾ ਚਾਹੀਦਾ ਹੈ।"],
}
CASES = [(lang, s) for lang, sentences in SENTENCES.items() for s in sentences]


@pytest.mark.parametrize("lang, sentence", CASES)
def test_clear_sentences(lang: str, sentence: str) -> None:
    assert detect_language(sentence) == lang
    assert detect_language(sentence.upper()) == lang  # case does not matter (english_capital relies on it)
    assert build_checker("language:response_language", {"language": lang}).check(sentence)


def test_every_ifeval_language_is_supported() -> None:
    ifeval_codes = {"en", "es", "pt", "ar", "hi", "fr", "ru", "de", "ja", "it", "bn", "uk", "th", "ur", "ta",
                    "te", "bg", "ko", "pl", "he", "fa", "vi", "ne", "sw", "kn", "mr", "gu", "pa", "ml", "fi"}
    assert ifeval_codes <= SUPPORTED_LANGUAGES


def test_wrong_language_fails() -> None:
    checker = build_checker("language:response_language", {"language": "fr"})
    assert not checker.check("I think we should go home now because it is late.")


def test_no_letters_counts_as_followed_like_ifeval() -> None:
    # IFEval counts langdetect's "no features" exception as followed
    assert detect_language("12345 !!! 678") is None
    assert build_checker("language:response_language", {"language": "de"}).check("12345 !!! 678")


def test_majority_script_decides_mixed_text() -> None:
    assert detect_language("The word 東京 means eastern capital in Japanese.") == "en"
    assert detect_language("東京タワーに行きました。Tokyo") == "ja"
    # a few stray kana in Chinese text do not make it Japanese
    assert detect_language("我们今天去了很多地方，看到了很多有意思的东西，还买了一本书ノ") == "zh"


def test_latin_text_without_evidence_defaults_to_english() -> None:
    assert detect_language("Xyzzy plugh") == "en"


def test_deterministic() -> None:
    text = "Desayunamos en McDonald's hoy"
    assert {detect_language(text) for _ in range(20)} == {"es"}
