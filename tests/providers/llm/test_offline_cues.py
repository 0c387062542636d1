"""The cue gates are only a speed-up: a cue expression never misses a match because of its gate."""

from __future__ import annotations

import pytest

from engram.providers.llm.offline import cues
from engram.providers.llm.offline.rewrite import to_third_person
from engram.providers.llm.offline.text import normalise, words

# At least one sentence for every alternative of every cue expression.
PROBES = """
I'll call you. I will go. We'll see. We will win. I am going to travel. We're going to move. I'm gonna try.
I plan to leave. We planned to stay. I'm planning to apply. I promise. She promised. The deadline is near.
It's due on Monday. Finish it by Friday. Done by tomorrow. By the end of May. I have an appointment.
It's scheduled. I schedule things. I signed up for yoga. I registered today. We booked a hotel.
I have to work. We need to talk. I must rest. Remind me later. I really love jazz. We like hiking.
I prefer tea. I just enjoy it. I adore cats. I hate mornings. I dislike noise. My favorite book. My favourite film.
I can't stand it. I'm a big fan of Bowie. I'm passionate about art. Not a fan. I don't like it. I do not enjoy that.
I never like waiting. It's my thing. That's my jam. She loves painting. I'm keen on counseling. I'm into climbing.
I'm interested in law. I'm obsessed with tea. It's a fun way to relax. A great outlet to vent. It helps me relax.
It helps me de-stress. Every day I run. Each weekend we hike. I usually read. I regularly swim. I often cook. I always sing.
I have an idea. Great ideas. Imagine that. I was imagining it. What if we flew? Let's brainstorm. A brainstorming session.
So creative. I create. I created it. Creating things. I paint. Painting helps. I painted. I draw. Drawing is fun. She draws.
I sketch. A story. Stories matter. A poem. Poetry night. A song. Songs help. Music heals. I compose. Composing tunes.
I invent. An inventor. I design. Designer shoes. Art class. My artwork. A craft. Crafts fair. Pottery class. I sculpt.
A photograph. Photography rocks. A novel. Writing is hard.
Actually, no. I meant Tuesday. Correction: it's Monday. To clarify, it's blue. Let me clarify. I was wrong. That's wrong.
That's not right. Not true. Scratch that. I no longer drink. Not anymore. I changed my mind. Tea instead of coffee.
Rather than walk. I misspoke. I misread it. I misheard you. Sorry, I meant Ann. Sorry I said Bob. No, it was red. Wait, what?
I feel fine. She feels good. I felt bad. A feeling. So emotional. My mood. My heart. In tears. I cried. Stop crying.
I want to go. She wants to stay. I wanted to win. I wanna sleep. I hope to see. He hopes to come. Hoping to win.
She plans to move. My goal. Big goals. My dream. Dreams matter. I aim to win. Aiming to please. Trying to help.
Working on it. Working towards a degree. I would like to go. I'd love to help. I aspire to lead. Pursuing law.
Thinking about moving. Looking into schools. My career. Continue my studies. Save up money. Saving for a car.
I'm excited to start. Thrilled to join. I can't wait to see. Looking forward to it. Determined to win. Ready to go.
I'm up for the challenge.
We need to leave. I got to go. Must do it. Remind me. My to-do list. My todo app. Don't forget milk. Remember to call.
It's due. By tonight. Pick up the kids. Sign up now. Follow up later. Call back soon. Call the doctor. Book a table.
Submit the form. Renew the passport.
I went home. We visited Rome. I saw it. I met Ann. I took a class. I had fun. I got a job. I made cake. I did it. I tried.
I started. I finished. I attended. I joined. I ran. I bought it. I found it. I received it. I won. I lost. I moved.
I traveled. I travelled. I celebrated. I painted. I adopted. I graduated. I gave. I came. I left. I chose. I wrote.
I began. I heard. I knew. I told her. I spent it. I sent it. I built it. I brought it. I caught it. I taught it.
I kept it. I read it. I sang. I swam. I drove. I rode. I ate. I flew. I grew. I threw it. I wore it. I walked.
My sister called. I just arrived. Yesterday was fun. Last week was busy. Last weekend. Last month. Last year. Last night.
Last Sunday. Two days ago. This morning.
It is a tool. It is an app. It means love. It refers to Rome. It works by magic. It consists of parts. Did you know that?
Apparently so. It turns out fine. Fun fact. Research shows it. Research says so. Studies show it. According to him.
The best way. The only way. How to cook. Invented in 1900. Founded in 2001. Located in Paris. I realize it. I realized.
Realizing it. I learned a lot. I learnt it. Learning is fun. It's so important to me. It's really important for me.
It matters to me.
"""


def sentences_of_probes() -> list[str]:
    return [s.strip() + "." for s in PROBES.replace("\n", " ").replace("?", ".").split(".") if s.strip()]


@pytest.mark.parametrize("name", sorted(cues.CUES))
def test_a_gate_never_hides_a_match_of_its_cue(name):
    pattern = cues.CUES[name]
    hidden = []
    for sentence in sentences_of_probes():
        keys = cues.sentence_keys(words(normalise(sentence)))
        if cues.count(pattern, sentence) and cues.TRIGGERS[name].isdisjoint(keys):
            hidden.append(sentence)
    assert hidden == []


def test_every_cue_matches_some_probe():
    counts = {name: 0 for name in cues.CUES}
    for sentence in sentences_of_probes():
        keys = cues.sentence_keys(words(normalise(sentence)))
        for name, n in cues.count_cues(sentence, keys).items():
            counts[name] += n
    assert all(counts.values()), counts


def test_first_person_words_inside_compounds_are_left_alone():
    assert to_third_person("I'm carving out some me-time for my fam.", "Mel") == "Mel is carving out some me-time for Mel's fam."
