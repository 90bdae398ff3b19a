"""Bundled data for the deterministic language identifier: frequent function words and letter cues.

Each list holds common, short function words of one language (lower case, apostrophes split off), so
that a few words of ordinary prose are enough to tell the languages that share a script apart.  Words
shared by several languages are allowed; the classifier divides their weight among those languages.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS: dict[str, frozenset[str]] = {
    # --- Latin script ----------------------------------------------------------------------------
    "en": _words(
        """the of and to a in is it you that he was for on are with as his they be at one have this from
        or had by but not what all were we when your can said there use an each which she do how their
        if will up other about out many then them these so some her would make like him into time has
        look two more write go see no way could people my than first been call who its now find long down
        day did get come made may part i me our us being am does doing very just also any because before
        after over under again here why where both few most such only own same too should don didn doesn
        isn wasn aren weren couldn wouldn shouldn won t ll ve today yesterday tomorrow english response
        hello thanks please yes"""
    ),
    "de": _words(
        """der die das und ist nicht ein eine einen einem einer eines ich du er sie es wir ihr mit auf für
        von zu den dem des im auch sich dass daß wie aber oder wenn noch nach bei aus um nur war sind hat
        haben wird werden kann mehr schon sehr hier heute dann doch man was wer wo warum weil über unter
        ohne gegen durch zum zur kein keine diese dieser dieses mein meine dein sein seine unser euch uns
        mich dich ihm ihn ihnen bin bist seid gibt ja nein immer wieder alle alles etwas nichts jetzt in am vom ins
        ihre unsere jeden jede"""
    ),
    "fr": _words(
        """le la les un une des du de et est sont ne pas que qui quoi je tu il elle nous vous ils elles on
        en dans sur pour par avec sans mais ou donc car ce cette ces cet mon ma mes ton ta tes son sa ses
        notre votre leur leurs au aux y ai as avons avez ont été être fait faire plus très bien aussi
        comme où quand tout tous toute toutes rien encore déjà aujourd hui oui non moi toi lui eux qu c cela ça
        ici chaque"""
    ),
    "es": _words(
        """el la los las un una unos unas y e o u de del al a en es son está están estoy ser estar que qué
        no sí se lo le les me te nos os mi mis tu tus su sus por para con sin pero como cuando donde muy
        más también ya hoy ayer mañana aquí allí este esta estos estas ese esa eso hay fue era tiene tengo
        hacer hace todo todos nada algo porque yo tú él ella nosotros ellos ellas usted ustedes entre
        sobre hasta desde cada quien mucho muchos mucha nuestra nuestro"""
    ),
    "it": _words(
        """il lo la i gli le un uno una di da del della dei delle al alla nel nella e ed è sono non che chi
        per con su tra fra ma anche come quando dove perché più molto ancora già oggi qui questo questa
        questi quello quella ho hai ha abbiamo avete hanno essere stato stata io tu lui lei noi voi loro
        mi ti si ci vi ne se sempre tutto tutti niente qualcosa dell nell all sull in mio mia miei mie tuo tua
        suo sua nostro nostra ogni cosa quanto"""
    ),
    "pt": _words(
        """o a os as um uma uns umas de do da dos das no na nos nas em e é são está estão não que se por
        para com sem mas como quando onde muito mais também já hoje aqui ali este esta isto esse essa
        isso eu tu ele ela nós vocês eles elas você meu minha seu sua ao aos à às pelo pela foi era tem
        têm ter fazer tudo nada porque sim ainda então todos todas toda todo cada quem muita meus minhas seus
        suas nosso nossa"""
    ),
    "nl": _words(
        """de het een en van ik je jij hij zij ze wij we jullie is zijn was waren niet dat die dit deze op
        te in met voor aan om uit bij naar over ook maar of als dan nog wel geen er hier daar wat wie waar
        waarom hoe heb hebt heeft hebben wordt worden kan kunnen moet zal zou al alles iets niets veel
        meer"""
    ),
    "pl": _words(
        """i w na z że się nie jest są to do od po za przez dla jak ale lub czy co kto gdzie kiedy
        dlaczego jestem być był była było ten ta te tego tej tym mnie mi ja ty on ona ono my wy oni one
        tak także też już jeszcze bardzo więc tylko"""
    ),
    "fi": _words(
        """ja on ei se että hän he me te minä sinä olen olet olemme ovat oli olivat kun mutta tai jos niin
        kuin myös vain jo nyt tämä tuo nämä ne mitä mikä missä miksi kuka joka jotka ole ollut hyvin
        paljon sitten vielä"""
    ),
    "sv": _words(
        """och i att det som en ett på är av för med till den har de inte om jag du han hon vi ni var men
        så från eller när hur vad vem"""
    ),
    "tr": _words(
        """ve bir bu da de için ile ben sen o biz siz onlar ne var yok çok daha gibi ama veya değil mi mı
        mu mü şu her şey olarak kadar sonra önce çünkü nasıl neden evet hayır"""
    ),
    "id": _words(
        """dan yang di ke dari ini itu dengan untuk tidak ada saya kamu dia kami kita mereka akan pada
        juga sudah atau tetapi karena bisa dalam seperti hanya lebih"""
    ),
    "sw": _words(
        """na ya wa za la kwa ni katika hii huo hiyo yake yao wake wao mimi wewe yeye sisi ninyi kama
        lakini au pia sana bado tu hapa pale leo kesho jana kila kuwa ana wana alikuwa walikuwa nini nani
        wapi lini kwamba hapana ndiyo"""
    ),
    "vi": _words(
        """và của là có không những các một được cho trong với người này đã để khi từ đến như cũng thì
        nhưng rất vào ra lại tôi bạn chúng anh em ông bà họ mà nào gì đó sẽ đang"""
    ),
    # --- Cyrillic --------------------------------------------------------------------------------
    "ru": _words(
        """и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее её
        мне было вот от меня еще ещё нет о из ему теперь когда даже ну ли если уже или ни быть был была
        были него до вас опять уж вам ведь там потом себя ничего ей может они тут где есть надо ней для
        мы тебя их чем сам без кто этот этого это эта эти того потому какой совсем здесь этом один почти
        мой тем чтобы сейчас куда зачем всех никогда можно при два об другой хоть после над больше тот
        через нас про всего них много очень сегодня"""
    ),
    "uk": _words(
        """і й та в у не що на я з із як а це до за він вона воно ми ви вони його її їх мені мене тобі
        бути є був була було були від про для так там тут хто коли якщо чи ще вже також дуже може треба
        але або цей ця ці цього який яка які сьогодні"""
    ),
    "bg": _words(
        """и в на не да се с за от е са че по това как но ще ли той тя то те ние вие аз ти бе беше бяха
        много има във със при след още тук там защо кога къде който която които което нещо днес съм сме
        сте един една едно"""
    ),
    # --- Devanagari ------------------------------------------------------------------------------
    "hi": _words(
        """है हैं था थी थे के की का में और से को पर यह वह ये वो नहीं भी एक लिए तो कर रहा रही रहे हो
        होता होती जो कि मैं हम आप तुम इस उस किया गया अब"""
    ),
    "mr": _words(
        """आहे आहेत होते होता होती आणि व या ते ती हे ही की नाही मध्ये साठी पण तर मी आम्ही तुम्ही त्या
        त्याचा त्याची त्याचे केले करून आता एक"""
    ),
    "ne": _words(
        """छ छन् छु हो हुन् र को का की मा ले बाट गर्न गरेको भएको यो त्यो यी ती पनि थियो थिए हुन्छ लागि
        तथा छैन म हामी तपाईं अब एक"""
    ),
    # --- Arabic script ---------------------------------------------------------------------------
    "ar": _words(
        """في من على إلى الى أن ان هذا هذه التي الذي ما لا هو هي كان كانت عن مع قد لم لن كل بين بعد قبل
        حتى أو او ثم هل نحن أنا انا هم"""
    ),
    "fa": _words(
        """و در به از که این آن را با است هست برای یک خود تا می شد شده بود های ها هم اما یا من ما شما او
        آنها نیست بسیار"""
    ),
    "ur": _words(
        """کے کی کا ہے ہیں میں اور سے کو پر یہ وہ تھا تھی تھے نہیں بھی ایک لیے کیا گیا ہم آپ اس جو کہ"""
    ),
}

# Letters that point to a language within its script: letter -> {language: weight per occurrence}.
LETTER_CUES: dict[str, dict[str, float]] = {
    **{c: {"es": 1.0} for c in "ñ¿¡"},
    **{c: {"pt": 1.0} for c in "ãõ"},
    "ç": {"pt": 0.4, "fr": 0.4, "tr": 0.2},
    "ê": {"pt": 0.5, "fr": 0.5},
    "é": {"fr": 0.3, "es": 0.2, "pt": 0.2, "it": 0.1},
    "á": {"es": 0.3, "pt": 0.3},
    "í": {"es": 0.3, "pt": 0.2},
    "ó": {"es": 0.3, "pt": 0.2, "pl": 0.2},
    "ú": {"es": 0.3, "pt": 0.2},
    "à": {"fr": 0.3, "it": 0.3, "pt": 0.2},
    **{c: {"fr": 0.6} for c in "èëîïûœâ"},
    "ù": {"fr": 0.4, "it": 0.3},
    "ô": {"fr": 0.4, "pt": 0.3},
    "ò": {"it": 0.6},
    "ì": {"it": 0.6},
    "ß": {"de": 1.0},
    "ä": {"de": 0.4, "fi": 0.4, "sv": 0.3},
    "ö": {"de": 0.4, "fi": 0.3, "sv": 0.3, "tr": 0.3},
    "ü": {"de": 0.5, "tr": 0.4},
    "å": {"sv": 1.0},
    **{c: {"pl": 1.0} for c in "ąęłśźżćń"},
    **{c: {"tr": 1.0} for c in "şğı"},
    **{c: {"vi": 1.0} for c in "ơưđạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ"},
    # Cyrillic
    **{c: {"uk": 2.0} for c in "іїєґ"},
    **{c: {"ru": 1.0} for c in "ыэё"},
    "ъ": {"bg": 1.0, "ru": 0.1},
    # Arabic script: Arabic proper uses ي ك ة ى, Persian ی ک گ پ چ ژ, Urdu adds ے ں ٹ ڈ ڑ ھ ہ.
    **{c: {"ar": 1.0} for c in "يكةىإ"},
    **{c: {"fa": 1.0, "ur": 0.6} for c in "یکگپچژ"},
    **{c: {"ur": 2.0} for c in "ےںٹڈڑھہ"},
}
