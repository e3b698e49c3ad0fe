#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *data;
    size_t elem_size;
    size_t capacity;
    size_t head;
    size_t tail;
    size_t count;
    int overwrite;
} ring_buffer_t;

enum {
    RB_OK = 0,
    RB_FULL = -1,
    RB_EMPTY = -2,
    RB_EINVAL = -3
};

/* Initialise a ring buffer holding `capacity` elements of `elem_size` bytes. */
int rb_init(ring_buffer_t *rb, size_t capacity, size_t elem_size, int overwrite)
{
    if (rb == NULL || capacity == 0 || elem_size == 0) {
        return RB_EINVAL;
    }
    if (capacity > SIZE_MAX / elem_size) {
        return RB_EINVAL;
    }
    rb->data = calloc(capacity, elem_size);
    if (rb->data == NULL) {
        return -ENOMEM;
    }
    rb->elem_size = elem_size;
    rb->capacity = capacity;
    rb->head = 0;
    rb->tail = 0;
    rb->count = 0;
    rb->overwrite = overwrite;
    return RB_OK;
}

void rb_free(ring_buffer_t *rb)
{
    if (rb == NULL) {
        return;
    }
    free(rb->data);
    rb->data = NULL;
    rb->capacity = 0;
    rb->head = rb->tail = rb->count = 0;
}

static inline int rb_is_empty(const ring_buffer_t *rb)
{
    return rb->count == 0;
}

static inline int rb_is_full(const ring_buffer_t *rb)
{
    return rb->count == rb->capacity;
}

static inline uint8_t *rb_slot(const ring_buffer_t *rb, size_t index)
{
    return rb->data + index * rb->elem_size;
}

/* Append one element. When full, either fails or drops the oldest element. */
int rb_push(ring_buffer_t *rb, const void *elem)
{
    if (rb == NULL || elem == NULL) {
        return RB_EINVAL;
    }
    if (rb_is_full(rb)) {
        if (!rb->overwrite) {
            return RB_FULL;
        }
        rb->tail = (rb->tail + 1) % rb->capacity;
        rb->count--;
    }
    memcpy(rb_slot(rb, rb->head), elem, rb->elem_size);
    rb->head = (rb->head + 1) % rb->capacity;
    rb->count++;
    return RB_OK;
}

/* Remove the oldest element, copying it into `out` if non-NULL. */
int rb_pop(ring_buffer_t *rb, void *out)
{
    if (rb == NULL) {
        return RB_EINVAL;
    }
    if (rb_is_empty(rb)) {
        return RB_EMPTY;
    }
    if (out != NULL) {
        memcpy(out, rb_slot(rb, rb->tail), rb->elem_size);
    }
    rb->tail = (rb->tail + 1) % rb->capacity;
    rb->count--;
    return RB_OK;
}

int rb_peek(const ring_buffer_t *rb, size_t offset, void *out)
{
    if (rb == NULL || out == NULL) {
        return RB_EINVAL;
    }
    if (offset >= rb->count) {
        return RB_EMPTY;
    }
    size_t index = (rb->tail + offset) % rb->capacity;
    memcpy(out, rb_slot(rb, index), rb->elem_size);
    return RB_OK;
}

size_t rb_size(const ring_buffer_t *rb)
{
    return rb ? rb->count : 0;
}

void rb_clear(ring_buffer_t *rb)
{
    if (rb != NULL) {
        rb->head = rb->tail = rb->count = 0;
    }
}

#ifdef RING_BUFFER_DEMO
static const char *rb_strerror(int code)
{
    switch (code) {
    case RB_OK:
        return "ok";
    case RB_FULL:
        return "buffer full";
    case RB_EMPTY:
        return "buffer empty";
    case RB_EINVAL:
        return "invalid argument";
    default:
        return strerror(-code);
    }
}

int main(void)
{
    ring_buffer_t rb;
    int rc = rb_init(&rb, 4, sizeof(int), 0);
    if (rc != RB_OK) {
        fprintf(stderr, "init failed: %s\n", rb_strerror(rc));
        return EXIT_FAILURE;
    }

    for (int i = 1; i <= 6; i++) {
        rc = rb_push(&rb, &i);
        printf("push %d -> %s (size=%zu)\n", i, rb_strerror(rc), rb_size(&rb));
    }

    int value;
    if (rb_peek(&rb, 1, &value) == RB_OK) {
        printf("second oldest: %d\n", value);
    }

    while ((rc = rb_pop(&rb, &value)) == RB_OK) {
        printf("pop -> %d\n", value);
    }
    printf("final pop: %s\n", rb_strerror(rc));

    rb_free(&rb);
    return EXIT_SUCCESS;
}
#endif /* RING_BUFFER_DEMO */
